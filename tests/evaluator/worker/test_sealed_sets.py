"""The timing's sealed input sets (korch_transport.sealed_sets), which every
CPU timing runner maps, reference and candidate runners alike: each set is
where the returned bases say, and no process can change a byte of it -- not
through the fd, a writable mapping, an upgraded read-only mapping, a reopen
through /proc, or a resize. A candidate that could write there would choose
the reference runners' inputs.

And the runner's side (korch_runner._stage_inputs): a staged call's tensors
are copied from the sealed sets to where the call reads them, and a header
that points outside either region is refused, not followed.

The oracle is this file's own: the tensors' bytes, and errno from the kernel."""
import ctypes
import errno
import mmap
import os
import sys
import unittest
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "evaluator", "worker", "py"))

import torch  # noqa: E402

import korch_runner as kr  # noqa: E402
import korch_transport as kt  # noqa: E402


def example_sets():
    g = torch.Generator().manual_seed(3)
    return [[torch.randn(17, 5, generator=g), 2.5, torch.arange(7, dtype=torch.int64) + j]
            for j in range(3)]


def as_bytes(t):
    return t.contiguous().view(torch.uint8).reshape(-1).numpy().tobytes()


class SealedSets(unittest.TestCase):
    def setUp(self):
        self.sets = example_sets()
        self.layouts = [kt.layout(s) for s in self.sets]
        self.fd, self.size, self.bases = kt.sealed_sets(self.sets, self.layouts)

    def tearDown(self):
        os.close(self.fd)

    def test_every_tensor_is_where_its_base_and_offset_say(self):
        mm = mmap.mmap(self.fd, self.size, prot=mmap.PROT_READ)
        try:
            for vals, (header, _), base in zip(self.sets, self.layouts, self.bases):
                for v, h in zip(vals, header):
                    if isinstance(v, torch.Tensor):
                        n = v.numel() * v.element_size()
                        self.assertEqual(mm[base + h["off"]:base + h["off"] + n], as_bytes(v))
        finally:
            mm.close()

    def test_the_fd_cannot_be_written(self):
        with self.assertRaises(PermissionError):
            os.pwrite(self.fd, b"\0" * 8, self.bases[1])

    def test_no_writable_shared_mapping_can_be_made(self):
        with self.assertRaises(PermissionError):
            mmap.mmap(self.fd, self.size, flags=mmap.MAP_SHARED,
                      prot=mmap.PROT_READ | mmap.PROT_WRITE)

    def test_a_read_only_mapping_cannot_be_made_writable(self):
        region = kt.Region(self.size, os.dup(self.fd), readonly=True)
        region.close_fd()
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        # (a read-only mmap gives no writable buffer: torch reads its address)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            view = torch.frombuffer(region.mm, dtype=torch.uint8)
        start = view.data_ptr()
        rc = libc.mprotect(start, mmap.PAGESIZE, mmap.PROT_READ | mmap.PROT_WRITE)
        err = ctypes.get_errno()
        del view
        self.assertEqual(rc, -1)
        self.assertIn(err, (errno.EACCES, errno.EPERM))

    def test_a_reopen_through_proc_cannot_write(self):
        try:
            fd = os.open("/proc/self/fd/%d" % self.fd, os.O_RDWR)
        except PermissionError:
            return  # refused at open: as good
        try:
            with self.assertRaises(PermissionError):
                os.write(fd, b"\0" * 8)
        finally:
            os.close(fd)

    def test_it_cannot_be_resized(self):
        for size in (self.size // 2, self.size * 2):
            with self.assertRaises(PermissionError):
                os.ftruncate(self.fd, size)


class RunnerStaging(unittest.TestCase):
    def setUp(self):
        self.sets = example_sets()
        self.layouts = [kt.layout(s) for s in self.sets]
        fd, self.size, self.bases = kt.sealed_sets(self.sets, self.layouts)
        self.in_size = 4096 + max(total for _, total in self.layouts)
        regions = [kt.Region(self.in_size), kt.Region(4096)]
        fds = [os.dup(r.fd) for r in regions] + [fd]
        for r in regions:
            r.close_fd()
        self.judge_in = regions[0]
        kr.map_regions({"in_size": self.in_size, "out_size": 4096, "sets_size": self.size}, fds)

    def tearDown(self):
        kr._REGIONS.clear()

    def header(self, j, shift, src_shift=0):
        return [dict(h, off=h["off"] + shift, src=h["off"] + self.bases[j] + src_shift)
                if h["t"] == "tensor" else h for h in self.layouts[j][0]]

    def test_a_staged_call_reads_exactly_its_set(self):
        for j, shift in ((2, 64), (0, 4032), (1, 0)):
            header = self.header(j, shift)
            kr._stage_inputs(header)
            got = kt.unpack(header, self.judge_in.mm, copy=True)  # what the judge sees
            for want, have in zip(self.sets[j], got):
                if isinstance(want, torch.Tensor):
                    self.assertTrue(torch.equal(want, have), (j, shift))

    def test_a_header_outside_the_regions_is_refused(self):
        with self.assertRaises(ValueError):
            kr._stage_inputs(self.header(2, 0, src_shift=self.size))
        with self.assertRaises(ValueError):
            kr._stage_inputs(self.header(0, self.in_size))
        with self.assertRaises(ValueError):
            kr._stage_inputs([dict(self.header(0, 0)[0], src=-64)])


if __name__ == "__main__":
    unittest.main()
