//! airlock-stage: placeholder until it lands.
