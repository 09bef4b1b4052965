"""scripts/bench http: N GETs of URL with asyncio + aiohttp, at most C at
once over one session. Prints the seconds the requests took."""
import asyncio
import sys
import time

import aiohttp


async def main(url, n, c):
    connector = aiohttp.TCPConnector(limit=c)
    async with aiohttp.ClientSession(connector=connector) as session:
        left = n

        async def worker():
            nonlocal left
            while left > 0:
                left -= 1
                async with session.get(url) as resp:
                    await resp.read()
                    assert resp.status == 200

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(c)))
        return time.perf_counter() - start


print(f"{asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))):.4f}")
