//! airlock-sandbox: placeholder until it lands.
