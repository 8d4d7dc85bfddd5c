"""The use cases both front ends call: profile one function, import or analyze a trace,
calibrate, scale; and the editor's long-lived job service."""
