"""Pure analyses over one trace: the trace model, ops, timeline, FLOPs, peaks, roofline,
verdict and checks. No asyncio, no pygls; never imports engine."""
