//! Placeholder: lands with its implementation.
