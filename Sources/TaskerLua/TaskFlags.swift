/// Which tasks have parts most tasks have not, by task id: checked on the
/// per-task path so that the common task touches no registry table for
/// them.
struct TaskFlags {
    /// A retry `when` predicate is stored (`refs.predicates`).
    var hasPredicate = TaskTable<Bool>()
    /// `h:on` handlers are registered (`refs.handlers`).
    var handlerTasks = TaskTable<Bool>()
    /// Tags were given (`refs.tags`).
    var tagged = TaskTable<Bool>()
}
