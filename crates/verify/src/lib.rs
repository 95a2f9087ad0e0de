//! airlock-verify: placeholder until it lands.
