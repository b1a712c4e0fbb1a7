"""The judge-runner channel (korch_transport.Channel) on a real socketpair.

A runner told that its next call follows at once waits for it awake
(recv with spin_ns, issue #7): the message must arrive the same whether it
comes during the spin or after it, with its file descriptors.
"""
import os
import socket
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "evaluator", "worker", "py"))

import korch_transport as kt  # noqa: E402


def channels():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    return kt.Channel(a.detach()), kt.Channel(b.detach())


def send_later(ch, delay_s, obj, fds=()):
    def run():
        time.sleep(delay_s)
        ch.send(obj, fds)
    t = threading.Thread(target=run)
    t.start()
    return t


class Spin(unittest.TestCase):
    def test_a_message_sent_during_the_spin_is_received_before_it_ends(self):
        judge, runner = channels()
        t = send_later(judge, 0.02, {"op": "call", "n": 1})
        t0 = time.monotonic()
        msg, fds = runner.recv(spin_ns=5_000_000_000)
        elapsed = time.monotonic() - t0
        t.join()
        self.assertEqual(msg, {"op": "call", "n": 1})
        self.assertEqual(fds, [])
        self.assertLess(elapsed, 4.0)  # returned on arrival, not at the spin's end

    def test_a_message_sent_after_the_spin_is_received_by_the_blocking_recv(self):
        judge, runner = channels()
        t = send_later(judge, 0.2, {"op": "call", "n": 2})
        t0 = time.monotonic()
        msg, _ = runner.recv(spin_ns=1_000_000)  # 1 ms of spin, then blocking
        elapsed = time.monotonic() - t0
        t.join()
        self.assertEqual(msg["n"], 2)
        self.assertGreaterEqual(elapsed, 0.15)

    def test_file_descriptors_travel_through_the_spin(self):
        judge, runner = channels()
        r, w = os.pipe()
        try:
            t = send_later(judge, 0.01, {"op": "regions"}, [r])
            msg, fds = runner.recv(spin_ns=2_000_000_000)
            t.join()
            self.assertEqual(msg["op"], "regions")
            self.assertEqual(len(fds), 1)
            os.write(w, b"x")
            self.assertEqual(os.read(fds[0], 1), b"x")
            os.close(fds[0])
        finally:
            os.close(r)
            os.close(w)

    def test_a_closed_peer_ends_the_spin_with_eof(self):
        judge, runner = channels()
        judge.sock.close()
        with self.assertRaises(EOFError):
            runner.recv(spin_ns=1_000_000_000)


if __name__ == "__main__":
    unittest.main()
