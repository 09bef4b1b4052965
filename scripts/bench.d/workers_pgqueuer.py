"""N no-op jobs through pgqueuer (PyPI) with K worker processes, same server:
enqueue in one batch, then K processes drain the queue. Prints seconds.
A fourth argument `async` commits with synchronous_commit=off, as tasker's
queue connections do (the server's default is on)."""
import asyncio, multiprocessing, sys, time

import asyncpg
from pgqueuer import AsyncpgDriver, Queries, QueueManager
from pgqueuer.types import QueueExecutionMode


SETTINGS = {}


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


async def enqueue(dsn, n):
    conn = await connect(dsn)
    await Queries(AsyncpgDriver(conn)).enqueue(["noop"] * n, [None] * n, [0] * n)
    await conn.close()


async def work(dsn):
    conn = await connect(dsn)
    qm = QueueManager(Queries(AsyncpgDriver(conn)))

    @qm.entrypoint("noop")
    async def noop(job):
        pass

    await qm.run(mode=QueueExecutionMode.drain, batch_size=10)
    await conn.close()


def worker(dsn, settings):
    SETTINGS.update(settings)
    asyncio.run(work(dsn))


if __name__ == "__main__":
    dsn, n, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if len(sys.argv) > 4 and sys.argv[4] == "async":
        SETTINGS["synchronous_commit"] = "off"
    asyncio.run(install(dsn))
    t = time.perf_counter()
    asyncio.run(enqueue(dsn, n))
    procs = [multiprocessing.Process(target=worker, args=(dsn, dict(SETTINGS))) for _ in range(k)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    print(f"{time.perf_counter() - t:.3f}")
