// SPDX-License-Identifier: Apache-2.0

package kvq

import (
	"fmt"
	"sync"
)

// typeSlots counts a worker's running handlers per type against WorkerOptions.TypeConcurrency,
// so a worker serving several types never runs more of one than its cap. A type without a cap
// is limited by the worker's Concurrency alone. A slot is reserved before the request that may
// bring a job of the type (an accept, or a finish that takes the next job), so the caps hold
// even while answers are in flight.
type typeSlots struct {
	mu      sync.Mutex
	caps    map[string]int
	running map[string]int
	freed   chan struct{} // a token once a slot is released: a waiting accept loop looks again
}

func newTypeSlots(caps map[string]int, handlers map[string]HandlerFunc) (*typeSlots, error) {
	s := &typeSlots{caps: map[string]int{}, running: map[string]int{}, freed: make(chan struct{}, 1)}
	for typ, n := range caps {
		if _, ok := handlers[typ]; !ok {
			return nil, fmt.Errorf("kvq: worker: TypeConcurrency names %q, which has no handler", typ)
		}
		if n < 1 {
			return nil, fmt.Errorf("kvq: worker: TypeConcurrency[%q] is %d: it must be at least 1", typ, n)
		}
		s.caps[typ] = n
	}
	return s, nil
}

// freeLocked is how many more handlers of typ may start (-1: no cap).
func (s *typeSlots) freeLocked(typ string) int {
	c, ok := s.caps[typ]
	if !ok {
		return -1
	}
	return c - s.running[typ]
}

// firstFree returns the first type of types, starting at index from and going round, that
// has a free slot, or "" if none has.
func (s *typeSlots) firstFree(types []string, from int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range types {
		typ := types[(from+i)%len(types)]
		if s.freeLocked(typ) != 0 {
			return typ
		}
	}
	return ""
}

// reserve takes up to n slots of typ and returns how many it took.
func (s *typeSlots) reserve(typ string, n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if free := s.freeLocked(typ); free >= 0 && free < n {
		n = free
	}
	s.running[typ] += n
	return n
}

// release gives back n slots of typ.
func (s *typeSlots) release(typ string, n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	s.running[typ] -= n
	s.mu.Unlock()
	select {
	case s.freed <- struct{}{}:
	default:
	}
}

// forNext is what a run of type own may take as its next job with its finish: its own type
// (its slot passes to the next job) and each other type with a free slot, one of which it
// reserves here. It returns those types and the reserved ones, for settleNext.
func (s *typeSlots) forNext(own string, types []string) (candidates, reserved []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, typ := range types {
		switch {
		case typ == own:
			candidates = append(candidates, typ)
		case s.freeLocked(typ) != 0:
			s.running[typ]++
			candidates = append(candidates, typ)
			reserved = append(reserved, typ)
		}
	}
	return candidates, reserved
}

// settleNext gives back the slots forNext reserved, but that of kept ("" for none): the type
// of the next job the run goes on with. Its own slot is given back too when the run goes on
// with another type.
func (s *typeSlots) settleNext(own, kept string, reserved []string) {
	for _, typ := range reserved {
		if typ != kept {
			s.release(typ, 1)
		}
	}
	if kept != "" && kept != own {
		s.release(own, 1)
	}
}
