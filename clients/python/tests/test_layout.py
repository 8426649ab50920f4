"""LAYOUT against a real daemon (PROTOCOL.md, LAYOUT): a folder's files by name and newest
first, a list of paths, each file's own failure, CANCEL mid-stream, blocking and asyncio."""
from __future__ import annotations

import asyncio
import os
import shutil
import unittest

from support import DaemonTestCase  # noqa: F401  (puts the package on sys.path)
import viewerd
from viewerd import protocol as p


class LayoutTests(DaemonTestCase):
    def setUp(self) -> None:
        self.client = viewerd.Client(self.daemon.socket, client_name="python-layout")
        self.addCleanup(self.client.close)

    def folder(self, name: str, sizes: list) -> str:
        directory = os.path.join(self.images, name)
        os.makedirs(directory)
        for i, (width, height) in enumerate(sizes):
            path = self.image(f"{name}-{i}.jpg", width, height)
            target = os.path.join(directory, f"{i:02d}.jpg")
            shutil.copyfile(path, target)
            os.utime(target, (1_700_000_000 + i, 1_700_000_000 + i))
        return directory

    def test_the_welcome_announces_layout(self) -> None:
        self.assertTrue(self.client.connect().capabilities & p.Capability.LAYOUT)

    def test_a_folder_by_name_and_newest_first(self) -> None:
        directory = self.folder("roll", [(64, 48), (48, 64), (80, 20)])
        with open(os.path.join(directory, "03.txt"), "w") as f:
            f.write("not an image\n")
        by_name = self.client.layout(folder=directory)
        self.assertEqual(sorted(by_name), [0, 1, 2, 3])
        self.assertEqual([(by_name[i].info.width, by_name[i].info.height) for i in range(3)], [(64, 48), (48, 64), (80, 20)])
        self.assertEqual(by_name[0].path, os.path.join(directory, "00.jpg"))
        self.assertEqual(by_name[3].error.code, 300)  # unsupported-format, the stream went on
        self.assertTrue(all(item.final for item in by_name.values()))

        newest = self.client.start_layout(folder=directory, order="modified", limit=2)
        batches = list(newest.batches())
        self.assertEqual(newest.count, 2)
        self.assertEqual({batch.total for batch in batches}, {4})
        final = {item.index: item for batch in batches for item in batch.items}
        # 03.txt has the folder's own mtime (now): the newest; then 02.jpg
        self.assertEqual([final[i].path for i in (0, 1)],
                         [os.path.join(directory, "03.txt"), os.path.join(directory, "02.jpg")])
        # stored now: no item is pending
        self.assertFalse(any(item.info_pending for batch in batches for item in batch.items))

    def test_a_list_of_paths_and_a_missing_folder(self) -> None:
        a = self.image("list-a.jpg", 30, 20)
        items = self.client.layout([a, os.path.join(self.images, "missing.jpg")])
        self.assertEqual((items[0].info.width, items[0].path), (30, None))
        self.assertEqual(items[1].error.code, 200)
        with self.assertRaises(viewerd.ViewerError) as caught:
            self.client.layout(folder=os.path.join(self.images, "nowhere"))
        self.assertEqual(caught.exception.name, "not-found")

    def test_cancel_mid_stream(self) -> None:
        directory = os.path.join(self.images, "cold")
        os.makedirs(directory)
        source = self.image("cold-source.jpg", 40, 30)
        for i in range(300):
            shutil.copyfile(source, os.path.join(directory, f"{i:03d}.jpg"))
        request = self.client.start_layout(folder=directory)
        batches = request.batches()
        next(batches)
        request.cancel()
        with self.assertRaises(viewerd.Cancelled):
            for _ in batches:
                pass
        self.assertGreater(self.client.ping(), 0)

    def test_asyncio(self) -> None:
        a = self.image("aio-a.jpg", 24, 12)

        async def scenario() -> dict:
            async with viewerd.AsyncClient(self.daemon.socket) as client:
                return await client.layout([a, a])

        items = asyncio.run(asyncio.wait_for(scenario(), 60))
        self.assertEqual([(items[i].info.width, items[i].info.height) for i in (0, 1)], [(24, 12), (24, 12)])


if __name__ == "__main__":
    unittest.main()
