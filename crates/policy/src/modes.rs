//! WorkMode, PermissionMode and access profiles. Placeholder until they land.
