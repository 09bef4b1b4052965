import CMallocTuning

/// glibc's malloc, set for a process whose threads hand batches to each
/// other. By default it gives the top of its heap back to the kernel as
/// soon as 128 KiB are free there, and serves blocks over 128 KiB with
/// mmap: each batch the loop fills and the journal's writer frees was then
/// a fresh map, unmapped again when freed. Every unmap of a process with
/// more than one thread running makes the kernel interrupt the other CPUs
/// to flush their TLBs, and the loop thread waited for that (a quarter of
/// the journal's cost in a run of 200,000 closures; `perf` showed it as
/// `smp_call_function_many_cond`). Kept instead: up to 32 MiB free at the
/// heap's top, 8 MiB of slack per growth, blocks under 4 MiB from the heap.
enum MemoryTuning {
    static func apply() {
        tasker_tune_malloc(32 << 20, 8 << 20, 4 << 20)
    }
}
