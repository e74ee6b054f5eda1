//! Placeholder: filled in by the forge adapter.
