// Command sampleapp is the test bed's sample application, run as a real
// container on the real node (package realnode builds its image as
// hack/images builds elasti's): a small HTTP server, and a client mode for
// pods that request it.
//
//	sampleapp                 serve on :$PORT (8080): JSON {servedBy, host, path}
//	sampleapp get <url>       GET url, print the status and body; exit 0 on 200
//
// It is a test fixture, not part of the product.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// getTimeout bounds a client request: a request at zero is held while the
// target's pod starts as a real container.
const getTimeout = 90 * time.Second

func main() {
	if len(os.Args) == 3 && os.Args[1] == "get" {
		os.Exit(get(os.Args[2]))
	}
	if err := serve(); err != nil {
		fmt.Fprintln(os.Stderr, "sampleapp:", err)
		os.Exit(1)
	}
}

// reply is what the server answers: which pod served, and the request as
// it arrived.
type reply struct {
	ServedBy string `json:"servedBy"`
	Host     string `json:"host"`
	Path     string `json:"path"`
}

func serve() error {
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	name, _ := os.Hostname()
	srv := &http.Server{Addr: ":" + port, ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(reply{ServedBy: name, Host: r.Host, Path: r.URL.Path})
	})}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	fmt.Printf("sampleapp %s serving on :%s\n", name, port)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// The kubelet's SIGTERM: finish what is in flight, then exit.
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func get(url string) int {
	client := &http.Client{Timeout: getTimeout}
	start := time.Now()
	resp, err := client.Get(url)
	if err != nil {
		fmt.Printf("GET %s: %v after %s\n", url, err, time.Since(start).Round(time.Millisecond))
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	fmt.Printf("GET %s: %d after %s\n%s", url, resp.StatusCode, time.Since(start).Round(time.Millisecond), body)
	if resp.StatusCode != http.StatusOK {
		return 1
	}
	return 0
}
