// util/thread_annotations.h — clang's thread-safety attributes (-Wthread-safety), as LevelDB's
// port/thread_annotations.h and abseil's base/thread_annotations.h spell them, with a KVQ_
// prefix. They state which mutex guards which member and which functions need it held; clang
// checks every access at compile time (the clang preset makes its findings errors). Other
// compilers see nothing.
//
// The mutex they name is a util::Mutex (util/mutex.h): libstdc++'s std::mutex carries no
// capability attributes.
#pragma once

#if defined(__clang__)
#define KVQ_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define KVQ_THREAD_ANNOTATION(x)
#endif

// On a member: read and written only with `mu` held.
#define KVQ_GUARDED_BY(mu) KVQ_THREAD_ANNOTATION(guarded_by(mu))
// On a pointer member: what it points to is read and written only with `mu` held.
#define KVQ_PT_GUARDED_BY(mu) KVQ_THREAD_ANNOTATION(pt_guarded_by(mu))
// On a function: the caller holds these mutexes.
#define KVQ_REQUIRES(...) KVQ_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
// On a function: the caller does not hold these mutexes (the function takes them).
#define KVQ_EXCLUDES(...) KVQ_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// On a mutex member: taken only after (before) the named ones, when both are held.
#define KVQ_ACQUIRED_AFTER(...) KVQ_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define KVQ_ACQUIRED_BEFORE(...) KVQ_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))

// For the lock types themselves (util/mutex.h).
#define KVQ_CAPABILITY(name) KVQ_THREAD_ANNOTATION(capability(name))
#define KVQ_SCOPED_CAPABILITY KVQ_THREAD_ANNOTATION(scoped_lockable)
#define KVQ_ACQUIRE(...) KVQ_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define KVQ_RELEASE(...) KVQ_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define KVQ_ASSERT_CAPABILITY(x) KVQ_THREAD_ANNOTATION(assert_capability(x))
#define KVQ_RETURN_CAPABILITY(x) KVQ_THREAD_ANNOTATION(lock_returned(x))

// On a function the analysis cannot follow; say why next to it.
#define KVQ_NO_THREAD_SAFETY_ANALYSIS KVQ_THREAD_ANNOTATION(no_thread_safety_analysis)
