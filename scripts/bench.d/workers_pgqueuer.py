"""pgqueuer (PyPI) measured as scripts/bench measures tasker's workers, on the
same server. Every connection commits with synchronous_commit=off, as
tasker's queue connections do. Usage:

  e2e DSN N K BATCH        K worker processes started and listening before
                           the clock; then N no-op jobs are enqueued in one
                           call; seconds until the last one ran.
  drain DSN N K BATCH      N jobs queued first, then K workers drain them:
                           seconds from the first job's start to the last's.
  latency DSN N            one idle worker; N jobs one at a time: p50, p99
                           and max ms from enqueue to the job's start.
  sleep DSN N K C BATCH    N jobs of 10 ms on K workers running C at once
                           (pgqueuer wants C >= 2 BATCH): seconds end to end
                           (workers started before).
"""
import asyncio, multiprocessing as mp, sys, time
from datetime import timedelta

import asyncpg
from pgqueuer import AsyncpgDriver, Queries, QueueManager
from pgqueuer.types import QueueExecutionMode

SETTINGS = {"synchronous_commit": "off"}


async def connect(dsn):
    return await asyncpg.connect(dsn, server_settings=SETTINGS)


async def install(dsn):
    conn = await connect(dsn)
    q = Queries(AsyncpgDriver(conn))
    try:
        await q.install()
    except Exception:
        pass  # already installed
    await conn.execute("DELETE FROM pgqueuer")
    await conn.close()


async def enqueue(dsn, n, name="noop"):
    conn = await connect(dsn)
    await Queries(AsyncpgDriver(conn)).enqueue([name] * n, [None] * n, [0] * n)
    await conn.close()


async def work(dsn, batch, mode, done, first, last, ready, stop, starts, concurrency):
    conn = await connect(dsn)
    qm = QueueManager(Queries(AsyncpgDriver(conn)))

    def seen():
        t = time.monotonic()
        with first.get_lock():
            if first.value == 0 or t < first.value:
                first.value = t
        with last.get_lock():
            if t > last.value:
                last.value = t
        with done.get_lock():
            done.value += 1
        return t

    @qm.entrypoint("noop")
    async def noop(job):
        t = seen()
        if starts is not None:
            starts.put(t)

    @qm.entrypoint("nap")
    async def nap(job):
        seen()
        await asyncio.sleep(0.01)

    async def watch():
        while not stop.is_set():
            await asyncio.sleep(0.005)
        qm.shutdown.set()

    if mode is QueueExecutionMode.continuous:
        asyncio.create_task(watch())
        ready.release()
    await qm.run(mode=mode, batch_size=batch, dequeue_timeout=timedelta(seconds=1),
                 max_concurrent_tasks=concurrency or None)
    await conn.close()


def worker(dsn, *args):
    asyncio.run(work(dsn, *args))


def start(dsn, k, batch, mode, starts=None, concurrency=0):
    done, first, last = mp.Value("i", 0), mp.Value("d", 0.0), mp.Value("d", 0.0)
    ready, stop = mp.Semaphore(0), mp.Event()
    procs = [mp.Process(target=worker, args=(dsn, batch, mode, done, first, last, ready, stop, starts, concurrency))
             for _ in range(k)]
    for p in procs:
        p.start()
    if mode is QueueExecutionMode.continuous:
        for _ in procs:
            ready.acquire()
        time.sleep(0.3)  # past qm.run's set-up: its LISTEN is on
    return procs, done, first, last, stop


def wait_done(done, n):
    while done.value < n:
        time.sleep(0.0005)


def finish(procs, stop):
    stop.set()
    for p in procs:
        p.join()


def main():
    what, dsn = sys.argv[1], sys.argv[2]
    args = [int(a) for a in sys.argv[3:]]
    asyncio.run(install(dsn))
    if what in ("e2e", "sleep"):
        n, k = args[0], args[1]
        conc, batch = (args[2], args[3]) if what == "sleep" else (0, args[2])
        procs, done, _, _, stop = start(dsn, k, batch, QueueExecutionMode.continuous, concurrency=conc)
        t = time.monotonic()
        asyncio.run(enqueue(dsn, n, "nap" if what == "sleep" else "noop"))
        wait_done(done, n)
        print(f"{time.monotonic() - t:.3f}")
        finish(procs, stop)
    elif what == "drain":
        n, k, batch = args
        asyncio.run(enqueue(dsn, n))
        procs, done, first, last, stop = start(dsn, k, batch, QueueExecutionMode.drain)
        for p in procs:
            p.join()
        print(f"{last.value - first.value:.3f}")
    elif what == "latency":
        n = args[0]
        starts = mp.Queue()
        procs, done, _, _, stop = start(dsn, 1, 10, QueueExecutionMode.continuous, starts)

        async def one_at_a_time():
            conn = await connect(dsn)
            q = Queries(AsyncpgDriver(conn))
            lat = []
            for _ in range(n):
                t = time.monotonic()
                await q.enqueue(["noop"], [None], [0])
                lat.append((await asyncio.get_running_loop().run_in_executor(None, starts.get) - t) * 1000)
            await conn.close()
            return sorted(lat)

        lat = asyncio.run(one_at_a_time())
        print(f"{lat[(n + 1) // 2 - 1]:.2f} {lat[-(-n * 99 // 100) - 1]:.2f} {lat[-1]:.2f}")
        finish(procs, stop)


if __name__ == "__main__":
    main()
