//! airlock-kernel: placeholder until it lands.
