//! The job graph on the wire: `GET /api/jobq/graph` answers a [`GraphSnapshot`] and
//! `POST /api/jobq/jobs/{id}/retry` the retried job's [`Node`]. These are the job graph's own
//! types (its snapshot is its serialized form, docs/swarm/jobq.md), re-exported so a client
//! needs only this crate's names.

pub use hyperhive_jobq::{Edge, GraphSnapshot, JobId, JobState, Node};
