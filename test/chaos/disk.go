package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/test/proc"
)

// Disk is a small tmpfs mounted for one scenario, so that a store can run out of space and get
// it back (remount with another size). It needs root, as this sandbox gives.
type Disk struct {
	Dir  string
	size int64
}

// NewDisk mounts a tmpfs of size bytes at dir.
func NewDisk(dir string, size int64) (*Disk, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mount tmpfs at %s: %v: %s", dir, err, out)
	}
	return &Disk{Dir: dir, size: size}, nil
}

// Resize remounts the tmpfs with a new size (never below what it holds).
func (d *Disk) Resize(size int64) error {
	if out, err := exec.Command("mount", "-o", fmt.Sprintf("remount,size=%d", size), d.Dir).CombinedOutput(); err != nil {
		return fmt.Errorf("remount %s: %v: %s", d.Dir, err, out)
	}
	d.size = size
	return nil
}

// Size is the current size.
func (d *Disk) Size() int64 { return d.size }

// Used is how much of it is taken.
func (d *Disk) Used() (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(d.Dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Blocks-st.Bfree) * int64(st.Bsize), nil
}

// Close unmounts it.
func (d *Disk) Close() {
	for i := 0; i < 20; i++ {
		if exec.Command("umount", d.Dir).Run() == nil {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	exec.Command("umount", "-l", d.Dir).Run()
}

// PrivateClickHouse is a ClickHouse server of one scenario's own, started by the stack script
// in a folder of its own on free ports (never the shared one).
type PrivateClickHouse struct {
	Addr  string
	dir   string
	stack func(ctx context.Context, action string) error
}

// StartPrivateClickHouse starts it with its state under dir.
func StartPrivateClickHouse(ctx context.Context, repo, dir string) (*PrivateClickHouse, error) {
	ports := make([]int, 3)
	for i := range ports {
		p, err := proc.FreePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	c := &PrivateClickHouse{Addr: fmt.Sprintf("127.0.0.1:%d", ports[0]), dir: dir}
	c.stack = func(ctx context.Context, action string) error {
		cmd := exec.CommandContext(ctx, filepath.Join(repo, "deploy/local/stack"), action, "clickhouse")
		cmd.Env = append(os.Environ(), "BACKFLOW_STACK_DIR="+dir, fmt.Sprintf("BACKFLOW_CLICKHOUSE_PORT=%d", ports[0]),
			fmt.Sprintf("BACKFLOW_CLICKHOUSE_HTTP_PORT=%d", ports[1]), fmt.Sprintf("BACKFLOW_CLICKHOUSE_INTERSERVER_PORT=%d", ports[2]))
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("stack %s clickhouse: %v\n%s", action, err, tail(string(out), 2000))
		}
		return nil
	}
	return c, c.stack(ctx, "up")
}

// Open creates database db and returns a connection to it.
func (c *PrivateClickHouse) Open(ctx context.Context, db string) (driver.Conn, error) {
	admin, err := chschema.Open(ctx, chschema.Conn{Addr: c.Addr})
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	if err := admin.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+db); err != nil {
		return nil, err
	}
	return chschema.Open(ctx, chschema.Conn{Addr: c.Addr, Database: db})
}

// Stop stops the server.
func (c *PrivateClickHouse) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c.stack(ctx, "down")
}
