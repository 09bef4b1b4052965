import TaskerCore
import TaskerLua
import TaskerQueue

/// Runs the jobs a worker claims as tasks of its Lua runtime and reports
/// how each ended: the values as JSON, or the failure with its kind.
final class WorkerJobs: WorkerJobRunner, EngineObserver {
    private unowned let runtime: LuaRuntime
    weak var queue: QueueWorker?
    private var jobOfTask: [TaskID: ClaimedJob] = [:]
    private var taskOfJob: [Int64: TaskID] = [:]

    init(runtime: LuaRuntime) { self.runtime = runtime }

    func start(_ job: ClaimedJob) {
        // the coordinator's secrets in its args: masked here as there
        for secret in job.secrets { SecretMask.shared.register(secret) }
        switch runtime.startDefined(name: job.name, args: job.args, timeout: job.timeout, attempt: job.attempt, key: job.key) {
        case .success(let task):
            if let outcome = runtime.engine.outcome(task) {
                report(job, task, outcome)  // ended at once (an interceptor discarded it)
                return
            }
            jobOfTask[task] = job
            taskOfJob[job.id] = task
        case .failure(let failure):
            queue?.finished(JobCompletion(id: job.id, claim: job.claim, state: .failed,
                                          error: failure.description, errorKind: failure.kind.rawValue))
        }
    }

    func stop(_ job: Int64) {
        guard let task = taskOfJob[job] else { return }
        runtime.engine.cancel(task, reason: "cancelled: the coordinator cancelled it or this worker's claim ended")
    }

    func taskFinished(_ id: TaskID, outcome: TaskOutcome, engine: Engine) {
        guard let job = jobOfTask.removeValue(forKey: id) else { return }
        taskOfJob[job.id] = nil
        report(job, id, outcome)
    }

    private func report(_ job: ClaimedJob, _ task: TaskID, _ outcome: TaskOutcome) {
        var c = JobCompletion(id: job.id, claim: job.claim, state: .failed)
        switch outcome {
        case .succeeded:
            switch runtime.storableValues(of: task, limit: LuaRuntime.maxRemoteValueBytes) {
            case .json(let text):
                c.state = .succeeded
                c.result = text
            case .notStorable(let why):
                c.error = "'\(job.name)' returned values that cannot go back to the coordinator: \(why)"
                c.errorKind = "error"
            }
        case .failed(let f), .cancelled(let f), .skipped(let f):
            // No dependencies run on a worker; a skip would be a cancellation.
            if outcome.state != .failed { c.state = .cancelled }
            // As the failure is here: kind, message and position apart, and
            // what the body raised, so the coordinator's awaiter sees it.
            c.error = f.message
            c.errorKind = f.kind.rawValue
            c.errorWhere = f.position
            c.errorValue = runtime.raisedValueJSON(f)
        }
        queue?.finished(c)
        runtime.release(task)
    }
}
