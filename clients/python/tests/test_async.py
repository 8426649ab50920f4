"""The asyncio client against a real viewerd."""
from __future__ import annotations

import asyncio
import os
import unittest

from support import DaemonTestCase
import viewerd
from viewerd import protocol as p


class AsyncClientTests(DaemonTestCase):
    def run_async(self, coroutine):  # type: ignore[no-untyped-def]
        return asyncio.run(asyncio.wait_for(coroutine, 60))

    def test_render_previews_pipelining_and_the_rest(self) -> None:
        small = self.image("a-small.jpg", 640, 480)
        big = self.image("a-big.jpg", 2400, 1800)

        async def scenario() -> None:
            async with viewerd.AsyncClient(self.daemon.socket) as client:
                welcome = await client.connect()
                self.assertEqual(welcome.version, 1)
                first = await client.render(small, 128)
                self.assertEqual((first.width, first.height, first.from_cache), (128, 96, False))
                self.assertTrue((await client.render(small, 128)).from_cache)

                await client.render(big, 64)  # stored: the PREVIEW's source
                request = await client.start_render(big, 200, 200, delivery="opportunistic")
                events = [event async for event in request.events()]
                self.assertEqual([type(e) for e in events], [p.Preview, p.Result])

                results = await asyncio.gather(*(client.render(small, 30 + i) for i in range(50)))
                self.assertEqual([r.width for r in results], list(range(30, 80)))

                fd = os.open(small, os.O_RDONLY)
                try:
                    self.assertEqual((await client.render(None, 64, fd=fd)).width, 64)
                finally:
                    os.close(fd)

                slow = await client.start_render(self.image("a-cancel.jpg", 4000, 3000), 450)
                await slow.set_priority("visible")
                await slow.cancel()
                with self.assertRaises(viewerd.Cancelled):
                    await slow.result()

                with self.assertRaises(viewerd.ViewerError) as caught:
                    await client.render("/nonexistent/x.jpg", 10)
                self.assertEqual(caught.exception.code, 200)
                self.assertEqual(await client.prefetch([self.image("a-pre.jpg", 500, 500)], 77), 1)
                self.assertGreaterEqual(await client.stop_prefetch_all(), 0)
                self.assertIn("requests", await client.stats())
                self.assertGreaterEqual(await client.invalidate(small), 1)
                await client.trim(1 << 40)
                await client.ping()

        self.run_async(scenario())

    def test_info_by_path_and_descriptor(self) -> None:
        photo = self.image("a-info.jpg", 300, 200)

        async def scenario() -> None:
            async with viewerd.AsyncClient(self.daemon.socket) as client:
                infos = await asyncio.gather(*(client.info(photo) for _ in range(5)))
                self.assertEqual({(i.kind, i.width, i.height, i.format) for i in infos},
                                 {(p.MediaKind.PHOTO, 300, 200, "jpeg")})
                fd = os.open(photo, os.O_RDONLY)
                try:
                    self.assertEqual((await client.info(fd=fd)).width, 300)
                finally:
                    os.close(fd)

        self.run_async(scenario())


if __name__ == "__main__":
    unittest.main()
