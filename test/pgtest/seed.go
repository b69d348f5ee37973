package pgtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/regent-mq/regent/broker/pg/migrate"
)

// seedTemplate is the migrated template database inside a seed.
const seedTemplate = "regent_template"

// seedFormat goes into every seed's name: raise it when what StartCluster's
// initdb makes changes, so that no older seed is copied.
const seedFormat = 1

// seeded returns a data directory to copy for a throwaway cluster: initdb's
// output with seedTemplate migrated in it, made once per schema and server
// and kept beside the clusters. initdb and the migrations were most of a
// test binary's first database (0.7 s, 0.5 s of it initdb); a copy on tmpfs
// takes 0.05 s.
func seeded() (string, error) {
	key, err := seedKey()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(scratchRoot(), "regent-pgtest-seed-"+key)
	data := filepath.Join(dir, "data")
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err == nil {
		// In use, so not an hour old: sweep leaves it.
		now := time.Now()
		_ = os.Chtimes(dir, now, now)
		return data, nil
	}
	tmp, err := ScratchDir("regent-pgtest-seeding-")
	if err != nil {
		return "", fmt.Errorf("make seed directory: %w", err)
	}
	if err := makeSeed(filepath.Join(tmp, "data")); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	// Another test binary may have made the same seed meanwhile: either
	// copy will do.
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		if _, statErr := os.Stat(filepath.Join(data, "PG_VERSION")); statErr != nil {
			return "", fmt.Errorf("keep seed: %w", err)
		}
	}
	return data, nil
}

// makeSeed runs initdb in dataDir, migrates seedTemplate and shuts the
// server down cleanly, so that a copy starts without recovery.
func makeSeed(dataDir string) error {
	c, err := StartCluster(dataDir, 0, throwaway...)
	if err != nil {
		return err
	}
	defer c.Stop()
	s := &server{base: c.URL("postgres")}
	if err := s.exec(context.Background(), "CREATE DATABASE "+seedTemplate); err != nil {
		return fmt.Errorf("create template database: %w", err)
	}
	if err := migrateDB(s.urlFor(seedTemplate)); err != nil {
		return fmt.Errorf("template database: %w", err)
	}
	return nil
}

// seedKey names a seed by what is in it: the server's binaries and every
// migration and function file.
func seedKey() (string, error) {
	bin, err := BinDir()
	if err != nil {
		return "", err
	}
	migrations, err := migrate.All()
	if err != nil {
		return "", err
	}
	functions, err := migrate.Functions()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintln(h, seedFormat, bin)
	for _, m := range migrations {
		fmt.Fprintln(h, m.Version, m.Name, len(m.SQL), m.SQL)
	}
	for _, f := range functions {
		fmt.Fprintln(h, f.Name, len(f.SQL), f.SQL)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// copySeed copies seed into dataDir with its owner and modes, which
// PostgreSQL checks.
func copySeed(seed, dataDir string) error {
	if err := os.MkdirAll(filepath.Dir(dataDir), 0o755); err != nil {
		return fmt.Errorf("make cluster directory: %w", err)
	}
	if out, err := exec.Command("cp", "-a", seed, dataDir).CombinedOutput(); err != nil {
		return fmt.Errorf("copy seed: %v: %s", err, out)
	}
	// The copy's pid file would be the seed's, whose server is gone.
	if err := os.Remove(filepath.Join(dataDir, "postmaster.pid")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("copy seed: %w", err)
	}
	return nil
}
