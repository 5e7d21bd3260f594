# SPDX-License-Identifier: Apache-2.0
"""Jittered exponential backoff, for the worker's retries of 503s and network errors."""

import random


class Backoff:
    """Delays base, 2·base, 4·base, ... up to cap, each drawn in [d/2, d] (jitter), so
    workers that failed together do not retry together."""

    def __init__(self, base=0.1, cap=10.0):
        self.base = base
        self.cap = cap
        self.failures = 0

    def next(self):
        """The delay before the next try (seconds); each call lengthens the next."""
        d = min(self.cap, self.base * (2 ** min(self.failures, 30)))
        self.failures += 1
        return random.uniform(d / 2, d)

    def reset(self):
        """After a success: start again from base."""
        self.failures = 0
