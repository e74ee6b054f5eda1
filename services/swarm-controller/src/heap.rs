//! The controller's live heap bytes, for benchmarks: with the `heap-stats` feature the global
//! allocator is the system allocator wrapped by `cap`, which counts the bytes allocated and not yet
//! freed. Resident memory (RSS) says what the process costs the machine, but it includes what
//! the allocator keeps after a free and pages it touched once; the live bytes say what the
//! program itself holds, so a benchmark can tell the two apart. Without the feature nothing is
//! counted and a deployed controller pays nothing for it.

#[cfg(feature = "heap-stats")]
#[global_allocator]
static ALLOCATOR: cap::Cap<std::alloc::System> = cap::Cap::new(std::alloc::System, usize::MAX);

/// The bytes allocated and not freed now, when counted (the `heap-stats` feature).
#[must_use]
pub fn live_bytes() -> Option<usize> {
    #[cfg(feature = "heap-stats")]
    return Some(ALLOCATOR.allocated());
    #[cfg(not(feature = "heap-stats"))]
    None
}

/// Appends `swarm_heap_live_bytes` in Prometheus text, when counted.
pub fn render(out: &mut String) {
    use std::fmt::Write;
    if let Some(bytes) = live_bytes() {
        let name = "swarm_heap_live_bytes";
        let _ = writeln!(
            out,
            "# HELP {name} heap bytes allocated and not freed (built with heap-stats)\n# TYPE {name} gauge\n{name} {bytes}"
        );
    }
}
