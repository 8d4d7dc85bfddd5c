# pyright: basic
"""What the process spent over the timed calls beside their wall time: its minor page faults,
its user and system CPU time (getrusage, all its threads, not its children) and how much
its resident memory grew (/proc/self/statm). Linux only: elsewhere the counts mean other
things. A glibc process that frees blocks over its mmap threshold gives them back to the OS
and faults them in again on the next call: pytorch/examples' word_language_model on 2 vCPUs
made 55,872 faults and 60.9 ms of system time a 118.5 ms iteration, 71.7 ms under TCMalloc
(docs/tries/word_language_model_2026-12-06.md)."""

import sys

try:
    import resource
except ImportError:  # Windows
    resource = None

LINUX = sys.platform.startswith("linux") and resource is not None


def usage_now():
    """(minor faults, user s, system s, resident pages) of this process so far; None off
    Linux."""
    if not LINUX or resource is None:
        return None
    r = resource.getrusage(resource.RUSAGE_SELF)
    try:
        with open("/proc/self/statm") as f:
            resident = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        resident = 0
    return (r.ru_minflt, r.ru_utime, r.ru_stime, resident)


class UsageClock:
    """Usage over spans (one timing's calls, or each timed step of a loop), each kept."""

    def __init__(self):
        self.spans = []  # (faults, user s, system s, resident pages grown) per span
        self.at = None

    def start(self):
        self.at = usage_now()

    def stop(self):
        now, at = usage_now(), self.at
        self.at = None
        if now is not None and at is not None:
            self.spans.append(tuple(b - a for a, b in zip(at, now)))

    def fields(self, calls, first=0):
        """UnprofiledTiming's fields per call over the spans from `first` on, which held
        `calls` calls (None where unknown)."""
        spans = self.spans[first:]
        if not spans or calls <= 0 or resource is None:
            return {
                "minor_faults_per_call": None,
                "user_us_per_call": None,
                "system_us_per_call": None,
                "resident_growth_per_call": None,
                "page_bytes": None,
            }
        faults, user, system, grown = (sum(s[i] for s in spans) for i in range(4))
        page = resource.getpagesize()
        return {
            "minor_faults_per_call": faults / calls,
            "user_us_per_call": user * 1e6 / calls,
            "system_us_per_call": system * 1e6 / calls,
            "resident_growth_per_call": grown * page / calls,
            "page_bytes": page,
        }
