# pyright: basic
"""The worker program: standard library + torch only, Python >= 3.9.

Shipped to every interpreter that runs it as one zip inside the bootstrap's stream and
imported from memory as the package ``kernelscope_worker`` (kernelscope/worker/loader.py);
its modules import each other relatively and nothing of kernelscope.
"""
