//! The Jail: confine a path to the workspace root. Placeholder until the jail lands.
