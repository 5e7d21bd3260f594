// SPDX-License-Identifier: Apache-2.0

package kvq

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// RunWithSignals runs w until the process gets SIGTERM or SIGINT, then drains it as Run does
// (running handlers get the worker's Grace, the rest are handed back) and returns Run's error:
// nil after a drain, so a program exits 0 after SIGTERM (`if err := ...; err != nil { log.Fatal(err) }`).
// A second signal during the drain exits the process at once with status 2; jobs still held
// then come back after their type's timeout (or at once, when the server declares the
// registered worker dead), counted as lost runs.
func RunWithSignals(w *Worker) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(signals)
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case s := <-signals:
			w.logf(levelInfo, "%v: draining (send it again to exit at once)", s)
			cancel()
		case <-finished:
			return
		}
		select {
		case s := <-signals:
			w.logf(levelWarn, "%v again: exiting now", s)
			os.Exit(2)
		case <-finished:
		}
	}()
	return w.Run(ctx)
}
