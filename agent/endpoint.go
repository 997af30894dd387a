package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/meshperf/meshperf/agent/endpoint"
	"github.com/meshperf/meshperf/internal/mtls"
)

// runEndpoint runs the agent with its pod endpoint learned on
// cfg.EndpointSocket: one life of run per state of the endpoint (none, or
// a pod's namespace and IP). A change ends the life, which ends the
// session with the coordinator, kills client runs and stops test servers
// in the old namespace, and starts the next life, which registers with the
// new addresses: the coordinator's registry keeps the newest registration.
// Every life shares files (nil: plaintext).
func runEndpoint(ctx context.Context, cfg Config, files *mtls.Files) error {
	log := cfg.Logger.With("node", cfg.NodeName)
	srv, err := endpoint.Listen(endpoint.ServerConfig{Path: cfg.EndpointSocket, NodeName: cfg.NodeName, Logger: log.With("component", "endpoint")})
	if err != nil {
		return fmt.Errorf("endpoint socket (--endpoint-socket): %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.Serve(ctx) }() // owner: runEndpoint; ends with ctx
	defer func() {
		cancel()
		<-serveDone //nolint:errcheck // waits for it to end: stopped here, its error is the stop's
	}()
	for {
		pod, err := srv.Acquire()
		if err != nil {
			return err
		}
		life := cfg
		if pod != nil {
			life.PodIP, life.PodNetNS = pod.IP, pod.NetNSPath()
			log.Info("pod endpoint: registering with its addresses", "pid", pod.PID, "pod_ip", pod.IP, "pod_netns", life.PodNetNS)
		}
		lifeCtx, endLife := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- run(lifeCtx, life, files, true) }() // owner: this loop; waited for below
		var lifeErr error
		changed := false
		select {
		case <-srv.Changes():
			changed = true
			endLife()
			lifeErr = <-done
		case lifeErr = <-done:
			endLife()
		case err := <-serveDone:
			endLife()
			<-done           //nolint:errcheck // waits for it to end: stopped here, its error is the stop's
			serveDone <- err // for the deferred wait
			if pod != nil {
				_ = pod.NetNS.Close()
			}
			if err == nil && ctx.Err() != nil {
				return nil
			}
			return errors.Join(errors.New("endpoint socket stopped serving"), err)
		}
		if pod != nil {
			_ = pod.NetNS.Close()
		}
		if !changed || ctx.Err() != nil {
			return lifeErr
		}
		if lifeErr != nil {
			return lifeErr
		}
		log.Info("pod endpoint changed: ending the session to register anew")
	}
}
