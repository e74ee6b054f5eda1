//! Placeholder: the job graph.
