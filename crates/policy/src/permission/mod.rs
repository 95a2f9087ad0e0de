//! The Permission stage. Placeholder until it lands.
