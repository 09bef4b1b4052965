/// The states a task's work goes through, as a value: inputs come in, the
/// new state and what the engine must do come out. The engine applies the
/// actions; nothing else writes the state. Out of a final state no input
/// moves it (every task ends in exactly one final state).
///
///     var life = TaskLifecycle()
///     life.apply(.queued)                  // waiting -> pending
///     life.apply(.attemptStarted)          // -> running, [.announceStart] the first time
///     life.apply(.finished(.succeeded))    // -> succeeded, [.deliver]
public struct TaskLifecycle: Sendable, Equatable {
    public enum Input: Sendable, Equatable {
        /// Ready and waiting for a slot (first time, after a retry's
        /// backoff, or requeued by a reactor).
        case queued
        /// Parked in an interceptor's batch.
        case held
        /// Let go by the batch: back to where it was.
        case released
        /// An attempt (or a group's or schedule's run) started.
        case attemptStarted
        /// Its result waits for reactions.
        case reacting
        /// The work ended (succeeded, failed or cancelled).
        case finished(TaskState)
    }

    /// What the engine must do (a set: no allocation on the per-task path).
    public struct Actions: OptionSet, Sendable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }

        /// Tell observers the task started (once, at its first attempt).
        public static let announceStart = Actions(rawValue: 1)
        /// Deliver the final outcome (handle, followers, group).
        public static let deliver = Actions(rawValue: 2)
    }

    public private(set) var state: TaskState = .waiting
    public private(set) var attemptsStarted = 0

    public init() {}

    /// Applies `input`; returns what the engine must do. An input that does
    /// not fit the state (anything after a final state) changes nothing.
    @discardableResult @inline(__always)
    public mutating func apply(_ input: Input) -> Actions {
        guard !state.isFinal else { return [] }
        switch input {
        case .queued:
            state = .pending
            return []
        case .held:
            state = .held
            return []
        case .released:
            guard state == .held else { return [] }
            state = attemptsStarted == 0 ? .pending : .running
            return []
        case .attemptStarted:
            attemptsStarted += 1
            state = .running
            return attemptsStarted == 1 ? [.announceStart] : []
        case .reacting:
            state = .reacting
            return []
        case .finished(let final):
            assert(final.isFinal, "finished with a state that is not final")
            state = final
            return [.deliver]
        }
    }
}
