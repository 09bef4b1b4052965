/// What an interceptor decides for a task about to start (README, Interceptors).
public enum InterceptDecision {
    /// Go on to the next interceptor; after the last, run.
    case execute
    /// Run now, skipping the remaining interceptors.
    case force
    /// Park the task in this interceptor's batch (state `held`).
    case hold
    /// End the task cancelled with kind `discarded`.
    case discard
    /// Wait, then ask this interceptor again (rate limiting).
    case delay(Double)
    /// The interceptor itself failed: fail the task (kind `interceptor`).
    case fail(TaskFailure)
}

/// One link of the chain every attempt passes before it starts:
///
///     ready queue ─▶ [interceptor 1] ─▶ [interceptor 2] ─▶ … ─▶ slot ─▶ body
///                         │ hold            │ delay
///                         ▼                 ▼
///                   batch (held)       timer, then ask again
///
/// Held tasks are released in hold order, ahead of the releasing task, when
/// a later task passes with `execute`/`force`, when the oldest has waited
/// `maxHold`, or when the run would otherwise be idle; they continue with the
/// next link. Called on the engine's loop, never inside other user code.
public protocol TaskInterceptor: AnyObject {
    var name: String { get }
    /// Seconds the oldest held task may wait before the batch is released.
    var maxHold: Double? { get }
    /// Decides for task `id`; `held` is how many this interceptor holds now.
    func intercept(_ id: TaskID, held: Int, engine: Engine) -> InterceptDecision
}

/// The tasks one interceptor holds, in hold order.
final class HeldBatch {
    var tasks: [TaskID] = []
    var timer: LoopTimer?
    /// When its oldest task was held (the loop's clock): `max_hold` counts
    /// from then, also for the interceptor a reload puts in its place.
    var oldestHeld: UInt64 = 0
}
