//! Placeholder: filled in by the sso adapter.
