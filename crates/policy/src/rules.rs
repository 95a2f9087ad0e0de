//! User rules from the user-level config. Placeholder until they land.
