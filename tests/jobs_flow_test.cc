// jobs_flow_test.cc: placeholder of the base commit, filled by its owner.
