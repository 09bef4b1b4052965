import TaskerCore

/// What waits on several tasks does when one decides it.
extension LuaRuntime {
    /// Cancels the unfinished handles among `ids` (from the drain loop, not
    /// inside the engine callout that reported the finish).
    func cancelOthers(_ ids: [TaskID], except winner: TaskID, reason: String) {
        enqueue(.call { [unowned self] in
            for id in ids where id != winner && !self.engine.isFinished(id) {
                self.engine.cancel(id, reason: reason)
            }
        })
    }
}
