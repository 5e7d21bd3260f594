// jobs/accept/accept.h — the accept path as the rest of jobs/ reaches it: the accept waiters a
// Jobs::Impl owns, the state its accepts share in this process (local_accepts.h), the scope
// they run in, the locks they hand out (pending_picks.h), and the index reads the counts share
// with the looks (index_levels.h). The entry points themselves are Jobs's methods (accept,
// accept_any, accept_batch, finish_and_accept in this folder).
#pragma once

#include "jobs/accept/accept_waiters.h"
#include "jobs/accept/index_levels.h"
#include "jobs/accept/local_accepts.h"
#include "jobs/accept/pending_picks.h"
