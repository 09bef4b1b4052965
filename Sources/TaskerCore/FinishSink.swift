/// The one observer of finishes that records every task (the journal's
/// recorder), called without reference counting. Through the observer
/// list each call retained and released the list and the observer (four
/// atomic operations, about 40 ns a task here: a tenth of the journal's
/// cost on a run of no-op tasks); the engine keeps this one strongly and
/// lends it to each call instead.
open class FinishSink {
    public init() {}

    /// Task `id` ended with `outcome` (after the observers were told);
    /// `facts` are the engine's (`Engine.facts`), read from the record the
    /// finish holds instead of looked up again. Not called for a finish
    /// the engine keeps as quick (`Engine.keepQuickFinishes`).
    open func taskFinished(_ id: TaskID, outcome: TaskOutcome, facts: TaskFacts, engine: Engine) {}
}

extension Engine {
    /// Makes `sink` the engine's finish sink (one at most), kept alive by
    /// the engine.
    public func setFinishSink(_ sink: FinishSink) {
        finishSinkOwner = sink
        finishSink = Unmanaged.passUnretained(sink)
    }
}
