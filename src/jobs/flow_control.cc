// flow_control.cc: placeholder of the base commit, filled by its owner.
