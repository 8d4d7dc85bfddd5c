# pyright: basic
"""What the process spent over the timed calls beside their wall time: its minor page faults
and its user and system CPU time (getrusage, all its threads, not its children). A glibc
process that frees blocks over its mmap threshold gives them back to the OS and faults them
in again on the next call: pytorch/examples' word_language_model on 2 vCPUs made 55,900
faults and 70 ms of system time a 115 ms step, 75 ms with the memory kept
(docs/tries/word_language_model_2026-12-06.md)."""

try:
    import resource
except ImportError:  # Windows
    resource = None


def usage_now():
    """(minor faults, user s, system s) of this process so far; None where unknown."""
    if resource is None:
        return None
    r = resource.getrusage(resource.RUSAGE_SELF)
    return (r.ru_minflt, r.ru_utime, r.ru_stime)


class UsageClock:
    """Usage summed over spans (a loop's timed steps, one timing's calls)."""

    def __init__(self):
        self.spent = [0, 0.0, 0.0]
        self.at = None
        self.known = resource is not None

    def start(self):
        self.at = usage_now()

    def stop(self):
        now, at = usage_now(), self.at
        self.at = None
        if now is None or at is None:
            return
        for i in range(3):
            self.spent[i] += now[i] - at[i]

    def fields(self, calls):
        """UnprofiledTiming's fields, per call over `calls` calls (None where unknown)."""
        if not self.known or calls <= 0:
            return {
                "minor_faults_per_call": None,
                "user_us_per_call": None,
                "system_us_per_call": None,
            }
        faults, user, system = self.spent
        return {
            "minor_faults_per_call": faults / calls,
            "user_us_per_call": user * 1e6 / calls,
            "system_us_per_call": system * 1e6 / calls,
        }
