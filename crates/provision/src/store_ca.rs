//! Placeholder: filled in by the store_ca adapter.
