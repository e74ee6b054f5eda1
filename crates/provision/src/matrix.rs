//! Placeholder: filled in by the matrix adapter.
