"""Running jobs: the warm launcher, remotes, Ray, shipping, targets, and the JobRunner
protocol both runners implement. Never imports analysis."""
