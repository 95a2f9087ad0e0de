//! The Bash Guard: parse a shell script with a real bash parser, normalise its words and deny
//! the dangerous families (CLI.md rule ids). Placeholder until the guard lands.
