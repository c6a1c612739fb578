package fwapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/internal/atomicfile"
)

// Files a Session keeps in its local state folder.
const (
	OriginalFile = "original.xml"
	JournalFile  = "journal.jsonl"
)

// JournalEntry is one line of a session's journal.
type JournalEntry struct {
	Time    time.Time          `json:"time"`
	Event   string             `json:"event"` // locking, start, relocked, lock-lost, leased, armed, written, not-written, adopted, confirmed, rolled-back, merged, foreign-edit, restored, restore-failed, lease-ended, end, recovered
	Target  string             `json:"target,omitempty"`
	SHA256  string             `json:"sha256,omitempty"`
	Actions []configxml.Action `json:"actions,omitempty"`
	Detail  string             `json:"detail,omitempty"`
	// Owner is the lock holder a session is about to become (locking), so
	// that a crash between taking the lock and recording the start can be
	// recovered: the lock is released only if it is still this owner's.
	Owner *LockOwner `json:"owner,omitempty"`
}

// SessionOptions configure a Session.
type SessionOptions struct {
	Target string // target name, for the journal and messages
	// Dir is the local state folder (e.g. ~/.local/state/fwab/<target>).
	Dir   string
	Owner LockOwner
	// RollbackAfter is how long the firewall waits for a confirmation
	// before it restores the previous config itself; default 120s.
	RollbackAfter time.Duration
	// ReconnectWait is how long Apply keeps trying to reach a firewall it
	// lost, past RollbackAfter; default 60s.
	ReconnectWait time.Duration
	// Lease is the session's lease on the box (see Leaser): the box
	// restores the original by itself unless fwab renews it within this
	// time; 0 means DefaultLease, negative none (a guard that cannot hold
	// one has none either).
	Lease time.Duration
	// KeepOriginal keeps the local copy of the original config (it holds
	// the box's keys and secrets) after the session restored and verified
	// it; by default it is removed then.
	KeepOriginal bool
	Logger       *slog.Logger
}

// RolledBackError means the firewall became unreachable during an apply
// and its own rollback restored the previous config.
type RolledBackError struct {
	FiredAt string
	Cause   error
}

func (e *RolledBackError) Error() string {
	return fmt.Sprintf("the firewall was unreachable during the apply (%v); its rollback fired (at %s) and restored the previous config", e.Cause, e.FiredAt)
}

func (e *RolledBackError) Unwrap() error { return e.Cause }

// Session is one fwab writer on one firewall: it holds the firewall lock,
// keeps the original config (local copy + SHA-256) and a journal, applies
// changes commit-confirmed, and restores the original at the end.
type Session struct {
	fw      Firewall
	guard   Guard
	opts    SessionOptions
	log     *slog.Logger
	orig    []byte
	origSum string
	touched map[configxml.Action]bool
	changed bool
	// mine are the configs fwab may have left on the box (the one before
	// the last step and the one it wrote, or the original): anything else
	// there is someone else's edit. written is the last config fwab wrote.
	mine    [][]byte
	written []byte

	// The lease, when the guard holds one: the renewer's stop and done,
	// and what ended the lease without fwab (nil while it holds).
	// baseline holds the runtime findings the original config already
	// had at the start (VerifyRuntime): a restore is checked for new ones.
	baseline map[string]bool

	// Merged names what someone else changed that the restore kept (set
	// by a Restore that merged); empty when it restored the original.
	Merged []string

	leaser    Leaser
	stopRenew context.CancelFunc
	renewDone chan struct{}
	lmu       sync.Mutex
	leaseLost error
}

// StartSession locks the firewall and records its config. The caller must
// call Close (which restores the original) on every path.
func StartSession(ctx context.Context, fw Firewall, guard Guard, opts SessionOptions) (*Session, error) {
	if opts.Dir == "" {
		return nil, errors.New("session: no state folder")
	}
	if opts.RollbackAfter <= 0 {
		opts.RollbackAfter = DefaultRollbackAfter
	}
	if opts.ReconnectWait <= 0 {
		opts.ReconnectWait = 60 * time.Second
	}
	if opts.Lease == 0 {
		opts.Lease = DefaultLease
	}
	if opts.Owner.Time.IsZero() {
		opts.Owner.Time = time.Now()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	j, jerr := ReadJournal(opts.Dir)
	switch {
	case len(j) > 0 && !journalClosed(j):
		if o := ownerOf(j); o != nil && o.PID != os.Getpid() && processAlive(o.PID) {
			return nil, fmt.Errorf("session: another fwab on this machine (%s) holds %s since %s: wait for it to finish",
				o.String(), opts.Target, j[0].Time.Format(time.RFC3339))
		}
		return nil, fmt.Errorf("session: %s holds an unfinished session (started %s): run 'fwab fw recover --target %s' first",
			filepath.Join(opts.Dir, JournalFile), j[0].Time.Format(time.RFC3339), opts.Target)
	case jerr != nil && !errors.Is(jerr, fs.ErrNotExist):
		return nil, fmt.Errorf("session: %w: a torn journal means fwab stopped mid-session; run 'fwab fw recover --target %s' first", jerr, opts.Target)
	}
	s := &Session{fw: fw, guard: guard, opts: opts, log: log, touched: map[configxml.Action]bool{}}
	// The journal says who is taking the lock before it is taken: a crash
	// right after the mkdir on the firewall must not leave a lock that
	// recover knows nothing of.
	os.Remove(filepath.Join(opts.Dir, JournalFile))
	if err := s.journal(JournalEntry{Event: "locking", Target: opts.Target, Owner: &opts.Owner, Detail: opts.Owner.String()}); err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	// abandon ends a session that did not start: nothing was changed.
	abandon := func(err error, unlock bool) error {
		if unlock {
			s.guard.Unlock(ctx, opts.Owner)
		}
		s.journal(JournalEntry{Event: "end", Detail: "not started: " + err.Error()})
		return fmt.Errorf("session: %w", err)
	}
	if err := guard.Lock(ctx, opts.Owner); err != nil {
		var locked *LockedError
		if l, ok := guard.(Leaser); ok && errors.As(err, &locked) {
			if info, lerr := l.LeaseStatus(ctx); lerr == nil && info.Held {
				locked.LeaseEnds = info.Expires
			}
		}
		return nil, abandon(err, false)
	}
	orig, err := fw.ReadConfig(ctx)
	if err != nil {
		return nil, abandon(err, true)
	}
	s.orig, s.origSum = orig, SHA256Hex(orig)
	s.mine = [][]byte{orig}
	if s.baseline, err = runtimeFindings(ctx, fw, orig); err != nil {
		return nil, abandon(fmt.Errorf("the running state, to check restores against: %w", err), true)
	}
	if err := atomicfile.WriteFile(filepath.Join(opts.Dir, OriginalFile), orig, 0o600); err != nil {
		return nil, abandon(fmt.Errorf("local backup: %w", err), true)
	}
	if l, ok := guard.(Leaser); ok && opts.Lease > 0 {
		if err := l.TakeLease(ctx, opts.Owner, orig, opts.Lease); err != nil {
			return nil, abandon(err, true)
		}
		s.leaser = l
	}
	if err := s.journal(JournalEntry{Event: "start", Target: opts.Target, SHA256: s.origSum, Detail: opts.Owner.String()}); err != nil {
		if s.leaser != nil {
			s.leaser.ReleaseLease(ctx)
		}
		return nil, abandon(err, true)
	}
	if s.leaser != nil {
		s.journal(JournalEntry{Event: "leased", Detail: opts.Lease.String()})
		s.startRenewer()
	}
	return s, nil
}

// startRenewer renews the lease a third of its length apart for as long
// as the session is open, whatever the sweep is doing (a probe, a long
// NDR search): only fwab's death, or a box it cannot reach for a whole
// lease, lets the lease end.
func (s *Session) startRenewer() {
	ctx, cancel := context.WithCancel(context.Background())
	s.stopRenew, s.renewDone = cancel, make(chan struct{})
	every := max(s.opts.Lease/3, time.Second)
	go func() {
		defer close(s.renewDone)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rctx, rcancel := context.WithTimeout(ctx, every)
			err := s.leaser.RenewLease(rctx, s.opts.Lease)
			rcancel()
			var lost *LeaseLostError
			switch {
			case errors.As(err, &lost):
				s.lmu.Lock()
				s.leaseLost = err
				s.lmu.Unlock()
				s.log.Error("the session's lease on the firewall ended", "err", err)
				return
			case err != nil && ctx.Err() == nil:
				s.log.Warn("could not renew the session's lease on the firewall", "err", err)
			}
		}
	}()
}

// Abandon stops the session's work on the box's side (the lease's
// renewals) without restoring anything, as a process that is about to
// die would: the lease then ends on the box, which restores itself. For
// a caller that cannot restore (and for tests of what follows).
func (s *Session) Abandon() { s.stopRenewer() }

// stopRenewer stops renewing the lease (the session is ending).
func (s *Session) stopRenewer() {
	if s.stopRenew != nil {
		s.stopRenew()
		<-s.renewDone
		s.stopRenew = nil
	}
}

// lost is what ended the lease without fwab, or nil.
func (s *Session) lost() error {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	return s.leaseLost
}

// holdLease renews the lease now, before a write: a lease that ended
// while fwab could not reach the box (the watchdog restored the original,
// or stood down) must not be written over.
func (s *Session) holdLease(ctx context.Context) error {
	if s.leaser == nil {
		return nil
	}
	if err := s.lost(); err != nil {
		return err
	}
	err := s.leaser.RenewLease(ctx, s.opts.Lease)
	var lost *LeaseLostError
	if errors.As(err, &lost) {
		s.lmu.Lock()
		s.leaseLost = err
		s.lmu.Unlock()
		s.journal(JournalEntry{Event: "lease-ended", Detail: lost.What})
	}
	return err
}

// expect tells the lease which configs the session may leave on the box
// next; the watchdog restores over nothing else.
func (s *Session) expect(ctx context.Context, configs ...[]byte) error {
	if s.leaser == nil {
		return nil
	}
	if err := s.lost(); err != nil {
		return err
	}
	sums := make([]string, len(configs))
	for i, c := range configs {
		sums[i] = SHA256Hex(c)
	}
	return s.leaser.ExpectConfigs(ctx, sums...)
}

// dropOriginal removes the local copy of the original config once the
// session has ended (restored and verified, or kept by Commit): it holds
// the box's keys, and nothing needs it any more. KeepOriginal keeps it.
func (s *Session) dropOriginal() {
	if !s.opts.KeepOriginal {
		os.Remove(filepath.Join(s.opts.Dir, OriginalFile))
	}
}

// isMine reports whether config is one fwab may have left on the box
// (byte for byte, or but for its <revision>).
func (s *Session) isMine(config []byte) bool {
	for _, m := range s.mine {
		if bytes.Equal(config, m) || configxml.SameIgnoringRevision(config, m) {
			return true
		}
	}
	return false
}

// foreignEdit says what someone else changed in config (cur), as far as
// a merge of fwab's own changes can tell.
func (s *Session) foreignEdit(cur []byte) error {
	written := s.written
	if written == nil {
		written = s.orig
	}
	e := &ForeignEditError{}
	if res, err := configxml.Undo(s.orig, written, cur); err == nil {
		e.Changed = res.Foreign
	}
	s.journal(JournalEntry{Event: "foreign-edit", SHA256: SHA256Hex(cur), Detail: strings.Join(e.Changed, ", ")})
	return e
}

// ForeignEditError is config.xml changed on the box by someone else since
// fwab last read or wrote it: an admin's emergency rule, a certificate an
// ACME client renewed. fwab writes nothing over it; a sweep stops.
type ForeignEditError struct {
	Changed []string // what changed, as element paths (Undo's Foreign)
}

func (e *ForeignEditError) Error() string {
	return "config.xml on the firewall was changed by someone else since fwab last wrote it (" + listPaths(e.Changed) + "): fwab writes nothing over it; the session's restore undoes only fwab's own changes and keeps that edit"
}

// StopsSweep: no later point can be applied without writing over it.
func (e *ForeignEditError) StopsSweep() bool { return true }

// ConflictError is a restore that found someone else's edit on the same
// elements fwab changed: nothing was written.
type ConflictError struct {
	Foreign   []string
	Conflicts []string
}

func (e *ConflictError) Error() string {
	return "restore: config.xml was changed by someone else (" + listPaths(e.Foreign) + ") on elements fwab changed too (" + listPaths(e.Conflicts) +
		"): fwab wrote nothing and ended its session (lock and lease released); the session's original is in its state folder (original.xml): compare it with the box's ('fwab fw pull', then 'fwab config diff'), and settle those elements by hand"
}

// listPaths shows up to ten element paths.
func listPaths(p []string) string {
	switch {
	case len(p) == 0:
		return "where, fwab cannot tell"
	case len(p) > 10:
		return strings.Join(p[:10], ", ") + fmt.Sprintf(" and %d more", len(p)-10)
	}
	return strings.Join(p, ", ")
}

// OriginalSHA256 is the hash of the config found at the start.
func (s *Session) OriginalSHA256() string { return s.origSum }

// Original is the config found at the start.
func (s *Session) Original() []byte { return s.orig }

func (s *Session) journal(e JournalEntry) error {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	return appendJournal(s.opts.Dir, e)
}

func appendJournal(dir string, e JournalEntry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, JournalFile), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("journal: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("journal: %w", err)
	}
	return f.Close()
}

// ReadJournal reads a state folder's journal.
func ReadJournal(dir string) ([]JournalEntry, error) {
	f, err := os.Open(filepath.Join(dir, JournalFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []JournalEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		var e JournalEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// A crash can leave a torn last line; everything before it stands.
			return out, fmt.Errorf("journal line %d: %w", n, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

func journalClosed(j []JournalEntry) bool {
	last := j[len(j)-1].Event
	return last == "end" || last == "recovered"
}

// Verifier checks that the runtime state shows a change took effect.
type Verifier func(ctx context.Context, st RuntimeState) error

// Apply writes config and applies changes commit-confirmed: a rollback to
// the config before this step is armed on the firewall first, and disarmed
// only when verify accepts the runtime state and the firewall still answers.
// If fwab loses the firewall meanwhile, it waits for it to come back and
// reports whether the rollback fired (*RolledBackError). A step the box
// refused before it wrote anything (*ConfigLockError) is disarmed and
// forgotten. On any other failure it restores the previous config itself.
func (s *Session) Apply(ctx context.Context, config []byte, changes []configxml.Change, verify Verifier) error {
	plan, err := PlanActions(changes)
	if err != nil {
		return err
	}
	if err := s.relock(ctx); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	// An earlier step's rollback still at work is waited for before the
	// config it restores is read as this step's previous one.
	if err := s.guard.Disarm(ctx); err != nil && !rollbackRan(err) {
		return fmt.Errorf("apply: %w", err)
	}
	if err := s.holdLease(ctx); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	prev, err := s.fw.ReadConfig(ctx)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	// Never write over someone else's edit: the sweep stops here, and the
	// session's restore undoes only fwab's own changes.
	if !s.isMine(prev) {
		return fmt.Errorf("apply: %w", s.foreignEdit(prev))
	}
	if err := s.expect(ctx, prev, config); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	// What the session had changed before this step: a step the box
	// refused before it wrote anything leaves it so.
	mine, written, changed, touched := s.mine, s.written, s.changed, maps.Clone(s.touched)
	s.mine, s.written = [][]byte{prev, config}, config
	// The box's timer starts once the arm is done: counting from before
	// it errs on the early side.
	armed := time.Now()
	if err := s.arm(ctx, prev, plan); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	s.journal(JournalEntry{Event: "armed", SHA256: SHA256Hex(prev), Actions: plan, Detail: s.opts.RollbackAfter.String()})
	for _, a := range plan {
		s.touched[a] = true
	}
	s.changed = true
	err = s.applyAndCheck(ctx, prev, config, changes, verify)
	if took, margin := time.Since(armed), ConfirmMargin(s.opts.RollbackAfter); err == nil && took > s.opts.RollbackAfter-margin {
		// A confirmation this close to the deadline would be a coin
		// toss: the change is not confirmed but undone, by whichever
		// side takes the hand-off, never by both at once.
		late := fmt.Errorf("the change took %v to apply and verify, past the rollback's deadline (%v) less its margin (%v): not confirmed; give the rollback more time (--rollback-after)",
			took.Round(100*time.Millisecond), s.opts.RollbackAfter, margin)
		if derr := s.guard.Disarm(ctx); derr != nil {
			if rollbackRan(derr) {
				s.journal(JournalEntry{Event: "rolled-back", SHA256: SHA256Hex(prev), Detail: derr.Error()})
				return fmt.Errorf("apply: %w; the firewall's rollback restored the previous config: %v", late, derr)
			}
			return fmt.Errorf("apply: %w; the rollback could not be taken over: %v", late, derr)
		}
		if perr := s.putBack(ctx, prev, plan); perr != nil {
			return fmt.Errorf("apply: %w; restoring the previous config also failed: %v", late, perr)
		}
		s.journal(JournalEntry{Event: "rolled-back", SHA256: SHA256Hex(prev), Detail: late.Error()})
		return fmt.Errorf("apply: %w (previous config restored)", late)
	}
	if err == nil {
		if err := s.guard.Disarm(ctx); err != nil {
			if rollbackRan(err) {
				s.journal(JournalEntry{Event: "rolled-back", SHA256: SHA256Hex(prev), Detail: err.Error()})
				return fmt.Errorf("apply: the change was verified, but the firewall's rollback took the hand-off first: %w", err)
			}
			return fmt.Errorf("apply: change verified but the rollback could not be disarmed and will restore the previous config: %w", err)
		}
		s.journal(JournalEntry{Event: "confirmed", SHA256: SHA256Hex(config), Actions: plan})
		return nil
	}
	if errors.Is(err, ErrConnectionLost) || isUnreachable(err) {
		return s.awaitRollback(ctx, prev, plan, err)
	}
	if isClaimed(err) {
		// The rollback fired before the write reached the box.
		return fmt.Errorf("apply: %w", s.afterClaimed(ctx, prev, plan, err))
	}
	if nw := (notWrittenError{}); errors.As(err, &nw) {
		// The box refused the step's write before writing anything (a
		// package's unlocked save may still have landed: the next step's
		// isMine or the restore's merge sees it). The rollback is
		// disarmed rather than left to restore and reload an unchanged
		// config, and then the step is forgotten. While the disarm is
		// not sure, the step stays the session's to undo, so its end
		// disarms and restores.
		derr := s.guard.Disarm(ctx)
		forget := func() { s.mine, s.written, s.changed, s.touched = mine, written, changed, touched }
		var (
			ran    *RollbackRanError
			broken *RollbackBrokenError
		)
		switch {
		case derr == nil:
			forget()
			s.journal(JournalEntry{Event: "not-written", SHA256: SHA256Hex(prev), Detail: err.Error()})
			return fmt.Errorf("apply: %w (the step's rollback is disarmed)", err)
		case errors.As(derr, &ran) && ran.Failed && !strings.HasPrefix(ran.At, "stood-down"):
			// Its saved copy was corrupt: it restored nothing over a
			// config.xml fwab had not changed.
			forget()
			s.journal(JournalEntry{Event: "not-written", SHA256: SHA256Hex(prev), Detail: err.Error()})
			return fmt.Errorf("apply: %w; meanwhile the step's rollback fired, found its saved copy corrupt (%s) and restored nothing: config.xml is still the previous config, as nothing was written", err, ran.At)
		case errors.As(derr, &ran):
			forget()
			if !ran.Failed {
				s.journal(JournalEntry{Event: "rolled-back", SHA256: SHA256Hex(prev), Detail: derr.Error()})
			}
			return fmt.Errorf("apply: %w; meanwhile %w", err, derr)
		case errors.As(derr, &broken):
			// It stopped half-way, its services perhaps too: the step
			// stays the session's, whose end restores them.
			return fmt.Errorf("apply: %w; meanwhile %w; the session's end restores the previous config and its services", err, derr)
		}
		return fmt.Errorf("apply: %w; the step's rollback could not be disarmed (the session's end disarms it and restores, unless it fires first): %w", err, derr)
	}
	// The firewall answers: put the previous config back now.
	s.log.Warn("apply failed, restoring the previous config", "err", err)
	if rerr := s.putBack(ctx, prev, plan); rerr != nil {
		if isClaimed(rerr) {
			// The deadline passed while the step failed: the rollback
			// restores it.
			return fmt.Errorf("apply: %w; %w", err, s.afterClaimed(ctx, prev, plan, rerr))
		}
		return fmt.Errorf("apply: %w; restoring the previous config also failed (the rollback armed on the firewall will retry): %v", err, rerr)
	}
	s.guard.Disarm(ctx)
	s.journal(JournalEntry{Event: "rolled-back", SHA256: SHA256Hex(prev), Detail: err.Error()})
	return fmt.Errorf("apply: %w (previous config restored)", err)
}

func isClaimed(err error) bool {
	var claimed *RollbackClaimedError
	return errors.As(err, &claimed)
}

// afterClaimed is the session's answer when the box refused a write of
// its own because the step's rollback had claimed the hand-off (cause):
// Disarm waits for the rollback to end; one that restored is reported
// once config.xml reads back as prev, one that stopped half-way (Disarm
// took it over) is finished by fwab's own restore.
func (s *Session) afterClaimed(ctx context.Context, prev []byte, plan []configxml.Action, cause error) error {
	derr := s.guard.Disarm(ctx)
	var (
		ran    *RollbackRanError
		broken *RollbackBrokenError
	)
	switch {
	case errors.As(derr, &ran) && !ran.Failed:
		got, err := s.fw.ReadConfig(ctx)
		if err != nil {
			return fmt.Errorf("%w; %w (config.xml could not be read back: %v)", cause, derr, err)
		}
		if SHA256Hex(got) != SHA256Hex(prev) {
			return fmt.Errorf("%w; %w, but config.xml has sha256 %s, want %s", cause, derr, SHA256Hex(got), SHA256Hex(prev))
		}
		s.journal(JournalEntry{Event: "rolled-back", SHA256: SHA256Hex(prev), Detail: derr.Error()})
		return fmt.Errorf("%w; %w", cause, derr)
	case errors.As(derr, &ran) && strings.HasPrefix(ran.At, "stood-down"):
		// Someone else's edit is on the box: it stays, as the rollback
		// left it.
		return fmt.Errorf("%w; %w", cause, derr)
	case errors.As(derr, &broken), errors.As(derr, &ran):
		// Stopped half-way, or its saved copy was corrupt and it restored
		// nothing: the hand-off is fwab's now (Disarm cleared the claim).
		if err := s.putBack(ctx, prev, plan); err != nil {
			return fmt.Errorf("%w; %w; restoring the previous config also failed: %v", cause, derr, err)
		}
		s.journal(JournalEntry{Event: "rolled-back", SHA256: SHA256Hex(prev), Detail: "the rollback did not finish its restore; restored by fwab"})
		return fmt.Errorf("%w; %w; fwab restored the previous config", cause, derr)
	case derr == nil:
		derr = errors.New("disarm found no rollback at work")
	}
	return fmt.Errorf("%w; the rollback's end could not be confirmed: %w", cause, derr)
}

// DefaultRollbackAfter is a step's rollback deadline unless the command
// sets one or the target's measured apply costs ask for more
// (RollbackFor).
const DefaultRollbackAfter = 120 * time.Second

// RollbackFor is the deadline a step needs whose apply took cost on this
// target: three times that (a slower box day, the verification and the
// read-back after the apply), rounded up to ten seconds, never under
// DefaultRollbackAfter.
func RollbackFor(cost time.Duration) time.Duration {
	d := (3*cost + 10*time.Second - 1) / (10 * time.Second) * (10 * time.Second)
	return max(d, DefaultRollbackAfter)
}

// ConfirmMargin is how long before the rollback's deadline a session
// stops confirming a change: a tenth of the deadline, at least one second
// and at most 30, and never more than a quarter of it. Disarm and the
// rollback hand off atomically, so the margin is not what keeps the box
// consistent; it keeps a change whose confirmation would be a coin toss
// from being confirmed at all.
func ConfirmMargin(after time.Duration) time.Duration {
	return min(max(after/10, time.Second), 30*time.Second, after/4)
}

// arm arms the rollback for a step: one that reboots when the step needs a
// reboot, since only a boot undoes what a boot applied (kernel modules). A
// guard that cannot reboot refuses such a step before anything changes.
func (s *Session) arm(ctx context.Context, prev []byte, plan []configxml.Action) error {
	if !slices.Contains(plan, configxml.ActionReboot) {
		return s.guard.ArmRollback(ctx, prev, s.opts.RollbackAfter)
	}
	r, ok := s.guard.(RebootRollbacker)
	if !ok {
		return errors.New("this firewall's rollback cannot reboot it, and a reboot-applied change (crypto.hardware) is undone only by a reboot: nothing changed")
	}
	return r.ArmRollbackReboot(ctx, prev, s.opts.RollbackAfter)
}

// relock makes sure the session still holds the firewall lock before a
// change. A reboot of the firewall (a firmware step, a power cut, a
// watchdog) clears /var/run and the lock with it; the session takes it
// again, and refuses the change when another writer took it meanwhile.
func (s *Session) relock(ctx context.Context) error {
	r, ok := s.guard.(Relocker)
	if !ok {
		return nil
	}
	retaken, err := r.Relock(ctx, s.opts.Owner)
	if err != nil {
		var locked *LockedError
		if errors.As(err, &locked) {
			s.journal(JournalEntry{Event: "lock-lost", Detail: locked.Holder})
			return fmt.Errorf("the firewall lost our lock (a reboot clears /var/run) and another writer took it: %w", err)
		}
		return err
	}
	if retaken {
		s.log.Warn("the firewall lock was gone (the firewall rebooted?); took it again", "owner", s.opts.Owner.String())
		s.journal(JournalEntry{Event: "relocked", Owner: &s.opts.Owner, Detail: "the lock was gone (a reboot clears /var/run); taken again"})
	}
	return nil
}

func isUnreachable(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded)
}

// notWrittenError is a step whose write the box refused before it wrote
// anything (a *ConfigLockError).
type notWrittenError struct{ error }

func (e notWrittenError) Unwrap() error { return e.error }

func (s *Session) applyAndCheck(ctx context.Context, prev, config []byte, changes []configxml.Change, verify Verifier) error {
	if err := s.fw.WriteConfig(ctx, config, "fwab apply"); err != nil {
		if lockErr := (*ConfigLockError)(nil); errors.As(err, &lockErr) {
			return notWrittenError{err}
		}
		return err
	}
	s.journal(JournalEntry{Event: "written", SHA256: SHA256Hex(config)})
	if err := s.fw.Apply(ctx, changes); err != nil {
		return err
	}
	if adopted, ok := adoptedConfig(s.fw); ok {
		s.journal(JournalEntry{Event: "adopted", SHA256: SHA256Hex(adopted), Detail: "the firewall's own service action saved config.xml (checked by the driver)"})
		// prev stays: the step's rollback may still restore it.
		if err := s.expect(ctx, prev, config, adopted); err != nil {
			return err
		}
		s.mine = append(s.mine, adopted)
		config = adopted
	}
	st, err := s.fw.RuntimeState(ctx)
	if err != nil {
		return err
	}
	if verify != nil {
		if err := verify(ctx, st); err != nil {
			return fmt.Errorf("runtime state does not show the change: %w", err)
		}
	}
	// The management connection must still work after the change.
	got, err := s.fw.ReadConfig(ctx)
	if err != nil {
		return err
	}
	if SHA256Hex(got) != SHA256Hex(config) {
		return fmt.Errorf("config on the firewall has sha256 %s after the write, want %s", SHA256Hex(got), SHA256Hex(config))
	}
	return nil
}

// awaitRollback handles a firewall lost during an apply. While it does not
// answer, the rollback armed on it is what protects it; fwab waits and then
// reports whether it fired. If it answers again before the rollback fires,
// fwab restores the previous config itself (the rollback stays armed until
// that is done, as a safety net) and then disarms it.
func (s *Session) awaitRollback(ctx context.Context, prev []byte, plan []configxml.Action, cause error) error {
	s.log.Warn("lost the firewall during apply; waiting for it or for its rollback", "after", s.opts.RollbackAfter, "err", cause)
	deadline := time.Now().Add(s.opts.RollbackAfter + s.opts.ReconnectWait)
	fired := func(at string) error {
		got, rerr := s.fw.ReadConfig(ctx)
		if rerr != nil {
			return fmt.Errorf("apply: %w (and the config could not be read back: %v)", &RolledBackError{FiredAt: at, Cause: cause}, rerr)
		}
		if SHA256Hex(got) != SHA256Hex(prev) {
			return fmt.Errorf("apply: %w, but config.xml has sha256 %s, want %s", &RolledBackError{FiredAt: at, Cause: cause}, SHA256Hex(got), SHA256Hex(prev))
		}
		s.journal(JournalEntry{Event: "rolled-back", SHA256: SHA256Hex(prev), Detail: "rollback on the firewall fired at " + at})
		return fmt.Errorf("apply: %w", &RolledBackError{FiredAt: at, Cause: cause})
	}
	for {
		done, at, err := s.guard.RollbackFired(ctx)
		if err == nil && done {
			return fired(at)
		}
		if err == nil {
			// The firewall answers and its rollback has not fired: undo now.
			perr := s.putBack(ctx, prev, plan)
			if isClaimed(perr) {
				// It is firing: wait for it rather than write again.
				return fmt.Errorf("apply: lost the connection during the apply (%w): %w", cause, s.afterClaimed(ctx, prev, plan, perr))
			}
			if perr == nil {
				perr = s.guard.Disarm(ctx)
			}
			if perr == nil {
				if done, at, ferr := s.guard.RollbackFired(ctx); ferr == nil && done {
					return fired(at)
				}
				got, rerr := s.fw.ReadConfig(ctx)
				switch {
				case rerr != nil:
					perr = rerr
				case SHA256Hex(got) != SHA256Hex(prev):
					perr = fmt.Errorf("config.xml has sha256 %s after restoring, want %s", SHA256Hex(got), SHA256Hex(prev))
				default:
					s.journal(JournalEntry{Event: "rolled-back", SHA256: SHA256Hex(prev), Detail: "connection lost during apply; restored by fwab"})
					return fmt.Errorf("apply: lost the connection during the apply (%w); the firewall answered again and fwab restored the previous config (sha256 verified)", cause)
				}
			}
			s.log.Warn("could not restore after a lost connection; the rollback on the firewall is still armed", "err", perr)
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errors.New("the rollback has not fired")
			}
			return fmt.Errorf("apply: lost the firewall (%v) and could not confirm its rollback within %v: %w; run 'fwab fw recover --target %s'",
				cause, s.opts.RollbackAfter+s.opts.ReconnectWait, err, s.opts.Target)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("apply: %w (while waiting for the firewall's rollback)", ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (s *Session) putBack(ctx context.Context, config []byte, plan []configxml.Action) error {
	if err := s.holdLease(ctx); err != nil {
		return err
	}
	if err := s.fw.WriteConfig(ctx, config, "fwab restore"); err != nil {
		return err
	}
	if err := s.fw.Apply(ctx, actionChanges(plan)); err != nil {
		return err
	}
	return rewriteAdopted(ctx, s.fw, config)
}

// configAdopter is a driver whose service actions may save config.xml
// themselves, in a way the driver checked (OPNsense's first IDS
// reconfigure creating its update cron): AdoptedConfig is that file after
// the last Apply.
type configAdopter interface {
	AdoptedConfig() (config []byte, ok bool)
}

func adoptedConfig(fw Firewall) ([]byte, bool) {
	if a, ok := fw.(configAdopter); ok {
		return a.AdoptedConfig()
	}
	return nil, false
}

// rewriteAdopted puts config back when the Apply that followed its write
// saved config.xml itself: a restore ends with the file it restores (the
// services already run as they should; the firewall's addition is inert).
func rewriteAdopted(ctx context.Context, fw Firewall, config []byte) error {
	if _, ok := adoptedConfig(fw); !ok {
		return nil
	}
	return fw.WriteConfig(ctx, config, "fwab restore (after the firewall saved its own change)")
}

// actionChanges makes one synthetic change per action so that a driver's
// Apply runs exactly those actions.
func actionChanges(actions []configxml.Action) []configxml.Change {
	out := make([]configxml.Change, len(actions))
	for i, a := range actions {
		out[i] = configxml.Change{Knob: "restore:" + string(a), Action: a}
	}
	return out
}

// Restore writes the original config back, runs every action the session
// used, and checks the config's hash.
func (s *Session) Restore(ctx context.Context) error {
	if !s.changed {
		return nil
	}
	if err := s.relock(ctx); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := s.guard.Disarm(ctx); err != nil && !rollbackOver(err) {
		return fmt.Errorf("restore: %w", err)
	}
	var plan []configxml.Action
	for _, a := range actionOrder {
		if s.touched[a] {
			plan = append(plan, a)
		}
	}
	// A lease that ended (the watchdog restored, or stood down over an
	// edit) is known before anything is written; the restore goes on
	// either way, fwab's own changes undone and nothing else.
	var lost *LeaseLostError
	if err := s.holdLease(ctx); err != nil && !errors.As(err, &lost) {
		return fmt.Errorf("restore: %w", err)
	}
	cur, err := s.fw.ReadConfig(ctx)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	target, targetSum := s.orig, s.origSum
	if !s.isMine(cur) {
		// Someone else edited config.xml: undo fwab's own changes on top
		// of the file as it now is, or, where both touched the same
		// elements, change nothing.
		written := s.written
		if written == nil {
			written = s.orig
		}
		res, err := configxml.Undo(s.orig, written, cur)
		if err != nil {
			return fmt.Errorf("restore: config.xml was changed by someone else and fwab cannot merge: %w", err)
		}
		if len(res.Conflicts) > 0 {
			return &ConflictError{Foreign: res.Foreign, Conflicts: res.Conflicts}
		}
		s.log.Warn("config.xml was changed by someone else during the session: fwab undoes only its own changes and keeps the other edit", "changed", strings.Join(res.Foreign, ", "))
		s.journal(JournalEntry{Event: "merged", SHA256: SHA256Hex(res.Config), Detail: "kept someone else's edit: " + strings.Join(res.Foreign, ", ")})
		target, targetSum = res.Config, SHA256Hex(res.Config)
		s.Merged = res.Foreign
		// The lease restores what it holds: from now on the merged config,
		// never the bare original over the edit.
		if s.leaser != nil && s.lost() == nil {
			s.stopRenewer()
			if err := s.leaser.ReleaseLease(ctx); err != nil {
				return fmt.Errorf("restore: %w", err)
			}
			if err := s.leaser.TakeLease(ctx, s.opts.Owner, target, s.opts.Lease); err != nil {
				return fmt.Errorf("restore: %w", err)
			}
			s.startRenewer()
		}
	}
	if s.leaser != nil && s.lost() == nil {
		if err := s.expect(ctx, cur, target); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
	}
	if err := restoreConfig(ctx, s.fw, target, targetSum, plan); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := verifyRestored(ctx, s.fw, target, s.baseline); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	s.mine = [][]byte{target}
	s.journal(JournalEntry{Event: "restored", SHA256: targetSum, Actions: plan})
	s.changed = false
	return nil
}

func restoreConfig(ctx context.Context, fw Firewall, orig []byte, sum string, plan []configxml.Action) error {
	if err := fw.WriteConfig(ctx, orig, "fwab restore original"); err != nil {
		return err
	}
	if err := fw.Apply(ctx, actionChanges(plan)); err != nil {
		return err
	}
	if err := rewriteAdopted(ctx, fw, orig); err != nil {
		return err
	}
	got, err := fw.ReadConfig(ctx)
	if err != nil {
		return err
	}
	if h := SHA256Hex(got); h != sum {
		return fmt.Errorf("config.xml on the firewall has sha256 %s after restoring, want %s", h, sum)
	}
	return nil
}

// Close restores the original config (if anything changed), releases the
// lock and closes the journal. It uses a fresh context when ctx is already
// cancelled (Ctrl-C), so that the restore still happens.
func (s *Session) Close(ctx context.Context) error {
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		defer cancel()
	}
	// The lease is renewed while the restore runs (a Disarm that waits, a
	// slow reload): it must not end under fwab's own restore.
	err := s.Restore(ctx)
	s.stopRenewer()
	var conflict *ConflictError
	if errors.As(err, &conflict) {
		// Nothing was written and nothing may be: neither the lease nor
		// a recover must put the original over the other edit.
		if s.leaser != nil {
			s.leaser.ReleaseLease(ctx)
		}
		s.guard.Unlock(ctx, s.opts.Owner)
		s.journal(JournalEntry{Event: "end", Detail: "not restored: " + err.Error()})
		return fmt.Errorf("session close: %w", err)
	}
	if err != nil {
		s.journal(JournalEntry{Event: "restore-failed", Detail: err.Error()})
		if s.leaser != nil && s.lost() == nil {
			return fmt.Errorf("session close: %w; the lock and the lease stay: the firewall restores the original by itself within %v unless you run 'fwab fw recover --target %s' first", err, s.opts.Lease, s.opts.Target)
		}
		return fmt.Errorf("session close: %w; the lock stays, run 'fwab fw recover --target %s'", err, s.opts.Target)
	}
	if s.leaser != nil {
		var lost *LeaseLostError
		if lerr := s.leaser.ReleaseLease(ctx); lerr != nil && !errors.As(lerr, &lost) {
			err = fmt.Errorf("session close: %w", lerr)
		} else if lerr != nil {
			// The watchdog restored the original too (this session
			// restored it first or after): the box has it either way.
			s.log.Warn("the lease had ended on the firewall before the session released it", "err", lerr)
		}
	}
	if uerr := s.guard.Unlock(ctx, s.opts.Owner); uerr != nil && err == nil {
		err = fmt.Errorf("session close: %w", uerr)
	}
	s.journal(JournalEntry{Event: "end", SHA256: s.origSum})
	s.dropOriginal()
	return err
}

// RecoverReport says what Recover did.
type RecoverReport struct {
	Started  time.Time
	SHA256   string
	Actions  []configxml.Action
	Restored bool // false when the firewall already had the original
	// LeaseEnded is what the session's lease did on the box without fwab
	// ("restored TIME": the box had put the original back by itself).
	LeaseEnded string
	// FromBox: recovered from what the lease keeps on the box (no local
	// journal: another machine).
	FromBox bool
	Owner   string // the session recovered, as its lease names it
	// Left: ended without writing, config.xml being someone else's edit.
	Left bool
	// NotStarted: fwab crashed while taking the lock, before it read or
	// changed anything; only its lock was released.
	NotStarted bool
}

// RecoverOptions tune Recover.
type RecoverOptions struct {
	// Force recovers a session that may still be alive: its lease on the
	// box has not ended and its process runs (or runs elsewhere).
	Force bool
	// Alive reports whether a process of this host runs; default kill(pid, 0).
	Alive func(pid int) bool
}

// SessionAliveError is a recover refused because the session it would end
// may still be running: its lease on the box has not ended.
type SessionAliveError struct {
	Owner   string
	Expires time.Time
	Why     string
}

func (e *SessionAliveError) Error() string {
	return fmt.Sprintf("the firewall is held by a session that may still be running (%s; %s); its lease ends at %s, after which the box restores that session's original by itself: wait for it, stop that fwab, or recover anyway with --force",
		e.Owner, e.Why, e.Expires.UTC().Format(time.RFC3339))
}

func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Recover finishes a session that crashed: it reads the journal and the
// local copy of the original config in dir, writes the original back when
// the firewall's config differs, runs the actions the journal shows were
// used, checks the hash, disarms any rollback and removes the lock.
func Recover(ctx context.Context, fw Firewall, guard Guard, dir string) (RecoverReport, error) {
	return RecoverWith(ctx, fw, guard, dir, RecoverOptions{})
}

// RecoverWith is Recover with options. A session whose lease on the box
// has not ended is recovered only when its process is gone from this
// host (or with Force). With no journal in dir (another machine), it
// recovers from what the lease keeps on the box (RecoverFromBox).
func RecoverWith(ctx context.Context, fw Firewall, guard Guard, dir string, opts RecoverOptions) (RecoverReport, error) {
	if opts.Alive == nil {
		opts.Alive = processAlive
	}
	var rep RecoverReport
	j, err := ReadJournal(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if _, ok := guard.(Leaser); ok {
			return RecoverFromBox(ctx, fw, guard, opts)
		}
		return rep, fmt.Errorf("recover: no journal in %s: nothing to recover", dir)
	}
	if len(j) == 0 {
		return rep, fmt.Errorf("recover: the journal in %s is unreadable (%v) so the original's hash is unknown; check %s by hand, remove %s, then push the original with 'fwab fw push' if the firewall needs it",
			dir, err, filepath.Join(dir, OriginalFile), filepath.Join(dir, JournalFile))
	}
	if journalClosed(j) {
		return rep, fmt.Errorf("recover: the last session in %s ended cleanly (%s at %s): nothing to recover", dir, j[len(j)-1].Event, j[len(j)-1].Time.Format(time.RFC3339))
	}
	i := slices.IndexFunc(j, func(e JournalEntry) bool { return e.Event == "start" })
	if i < 0 {
		rep.NotStarted = true
		return rep, recoverUnstarted(ctx, guard, dir, j[0])
	}
	start := j[i]
	rep.Started, rep.SHA256 = start.Time, start.SHA256
	orig, err := os.ReadFile(filepath.Join(dir, OriginalFile))
	if err != nil {
		return rep, fmt.Errorf("recover: %w", err)
	}
	if h := SHA256Hex(orig); h != start.SHA256 {
		return rep, fmt.Errorf("recover: %s has sha256 %s but the journal recorded %s: refusing to write it", OriginalFile, h, start.SHA256)
	}
	touched := map[configxml.Action]bool{}
	for _, e := range j {
		for _, a := range e.Actions {
			touched[a] = true
		}
	}
	for _, a := range actionOrder {
		if touched[a] {
			rep.Actions = append(rep.Actions, a)
		}
	}
	lease, err := endLease(ctx, guard, ownerOf(j), opts, &rep)
	if err != nil {
		return rep, err
	}
	if err := guard.Disarm(ctx); err != nil && !rollbackOver(err) {
		return rep, fmt.Errorf("recover: %w", err)
	}
	cur, err := fw.ReadConfig(ctx)
	if err != nil {
		return rep, fmt.Errorf("recover: %w", err)
	}
	// Never over someone else's edit: the lease stood down over one,
	// config.xml is none of the configs the session may have left there,
	// or the session had merged one into its restore (the original alone
	// would drop it).
	curSum := SHA256Hex(cur)
	leased := len(lease.Written) > 0 || strings.HasPrefix(rep.LeaseEnded, "restored")
	merged := slices.ContainsFunc(j, func(e JournalEntry) bool { return e.Event == "merged" })
	if merged || strings.HasPrefix(rep.LeaseEnded, "stood-down") || leased && curSum != start.SHA256 && !slices.Contains(lease.Written, curSum) {
		if err := guard.ForceUnlock(ctx); err != nil {
			return rep, fmt.Errorf("recover: %w", err)
		}
		detail := "config.xml (sha256 " + curSum + ") is someone else's edit: left as it is"
		if merged {
			detail = "the session had kept someone else's edit in its restore (config.xml sha256 " + curSum + "): left as it is"
		}
		if err := appendJournal(dir, JournalEntry{Time: time.Now().UTC(), Event: "recovered", SHA256: curSum, Detail: detail}); err != nil {
			return rep, fmt.Errorf("recover: %w", err)
		}
		releaseLease(ctx, guard)
		return rep, fmt.Errorf("recover: %s; the session is ended (lock released) and nothing was written; its original is %s: compare it with the box's ('fwab fw pull', then 'fwab config diff') and settle by hand",
			detail, filepath.Join(dir, OriginalFile))
	}
	// A config written during the session means the running state may
	// differ even when config.xml is the original again: a crash between
	// the restore's write and its service actions leaves exactly that.
	// A box that restored itself (its lease) ran a full reload already.
	written := slices.ContainsFunc(j[i:], func(e JournalEntry) bool { return e.Event == "written" })
	if strings.HasPrefix(rep.LeaseEnded, "restored") {
		written = false
	}
	if curSum != start.SHA256 || written {
		if len(rep.Actions) == 0 {
			// A crash between write and apply leaves no applied actions in
			// the journal; a written entry means the config changed. Every
			// action runs but a reboot, which an armed entry would name.
			for _, a := range actionOrder {
				if a != configxml.ActionReboot {
					rep.Actions = append(rep.Actions, a)
				}
			}
		}
		if err := restoreConfig(ctx, fw, orig, start.SHA256, rep.Actions); err != nil {
			return rep, fmt.Errorf("recover: %w", err)
		}
		rep.Restored = true
	}
	if err := guard.ForceUnlock(ctx); err != nil {
		return rep, fmt.Errorf("recover: %w", err)
	}
	if err := appendJournal(dir, JournalEntry{Time: time.Now().UTC(), Event: "recovered", SHA256: start.SHA256, Actions: rep.Actions}); err != nil {
		return rep, fmt.Errorf("recover: %w", err)
	}
	releaseLease(ctx, guard)
	// Checked last, with the session already ended: a finding here (the
	// original's own, for all recover knows: it has no baseline) is
	// reported as a failure but leaves nothing to recover again.
	if err := verifyRestored(ctx, fw, orig, nil); err != nil {
		return rep, fmt.Errorf("recover: the session is ended, but %w", err)
	}
	return rep, nil
}

// recoverUnstarted finishes a session that crashed while taking the lock:
// the config was not read, let alone changed, so only the lock may need
// removing, and only if it is still the one this session took.
func recoverUnstarted(ctx context.Context, guard Guard, dir string, first JournalEntry) error {
	if first.Event != "locking" || first.Owner == nil {
		return fmt.Errorf("recover: the journal in %s has no start entry and no lock owner (first entry %q); check the firewall's %s by hand, then remove %s",
			dir, first.Event, LockDir, filepath.Join(dir, JournalFile))
	}
	detail := "session had not started; its lock was released"
	// It may have taken its lease already (the lease comes before the
	// start entry): a lease of its own token goes too, nothing having
	// been changed.
	if l, ok := guard.(Leaser); ok {
		info, err := l.LeaseStatus(ctx)
		if err != nil {
			return fmt.Errorf("recover: %w", err)
		}
		if info.Token == first.Owner.Token {
			var lost *LeaseLostError
			if err := l.ReleaseLease(ctx); err != nil && !errors.As(err, &lost) {
				return fmt.Errorf("recover: %w", err)
			}
			detail += " with its lease"
		}
	}
	if err := guard.Unlock(ctx, *first.Owner); err != nil {
		if errors.Is(err, ErrConnectionLost) || isUnreachable(err) {
			return fmt.Errorf("recover: %w", err)
		}
		// No lock, or another fwab's: not ours to remove.
		detail = "session had not started; no lock of its own to release (" + err.Error() + ")"
	}
	if err := appendJournal(dir, JournalEntry{Time: time.Now().UTC(), Event: "recovered", Detail: detail}); err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	return nil
}

// Commit ends the session keeping the config now on the firewall (fwab fw
// push and apply): nothing is restored, the lock is released and the
// journal closed.
func (s *Session) Commit(ctx context.Context) error {
	cur, err := s.fw.ReadConfig(ctx)
	if err != nil {
		return fmt.Errorf("session commit: %w", err)
	}
	s.changed = false
	s.stopRenewer()
	if s.leaser != nil {
		// The config now on the box is kept: the lease must not restore
		// the original later.
		if err := s.leaser.ReleaseLease(ctx); err != nil {
			return fmt.Errorf("session commit: %w", err)
		}
	}
	if err := s.guard.Unlock(ctx, s.opts.Owner); err != nil {
		return fmt.Errorf("session commit: %w", err)
	}
	err = s.journal(JournalEntry{Event: "end", SHA256: SHA256Hex(cur), Detail: "kept"})
	s.dropOriginal()
	return err
}

// ApplyChecked is Apply verified by ChangeVerifier: the runtime state must
// show every changed knob as the config says. Its signature is the one a
// sweep's Apply step takes.
func (s *Session) ApplyChecked(ctx context.Context, config []byte, changes []configxml.Change) error {
	c, err := configxml.LoadBytes(config)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	return s.Apply(ctx, config, changes, ChangeVerifier(c, changes))
}

// ownerOf is the lock owner a journal recorded (nil when none).
func ownerOf(j []JournalEntry) *LockOwner {
	for _, e := range j {
		if e.Owner != nil {
			return e.Owner
		}
	}
	return nil
}

// endLease ends the lease of the session being recovered, unless that
// session may still be alive: a lease that has not ended, held by this
// journal's process still running here, or by another session.
func endLease(ctx context.Context, guard Guard, owner *LockOwner, opts RecoverOptions, rep *RecoverReport) (LeaseInfo, error) {
	l, ok := guard.(Leaser)
	if !ok {
		return LeaseInfo{}, nil
	}
	info, err := l.LeaseStatus(ctx)
	if err != nil {
		return info, fmt.Errorf("recover: %w", err)
	}
	rep.Owner = info.Owner
	if info.Held && info.Now.Before(info.Expires) && !opts.Force {
		switch {
		case owner == nil || owner.Token != info.Token:
			return info, fmt.Errorf("recover: %w", &SessionAliveError{Owner: info.Owner, Expires: info.Expires, Why: "not the session this machine's journal records"})
		case opts.Alive(owner.PID):
			return info, fmt.Errorf("recover: %w", &SessionAliveError{Owner: info.Owner, Expires: info.Expires, Why: fmt.Sprintf("its process %d still runs on this host", owner.PID)})
		}
	}
	// Claimed, not cleared: the files (what the lease did, the configs
	// it allowed) stay until the recover is done, so that a recover that
	// stops half-way decides the same when it runs again.
	var lost *LeaseLostError
	switch err := l.ClaimLease(ctx); {
	case errors.As(err, &lost):
		rep.LeaseEnded = lost.What
	case err != nil:
		return info, fmt.Errorf("recover: %w", err)
	}
	return info, nil
}

// releaseLease clears an ended or claimed lease's files once a recover is
// done (best effort: a lease already gone is fine).
func releaseLease(ctx context.Context, guard Guard) {
	if l, ok := guard.(Leaser); ok {
		l.ReleaseLease(ctx)
	}
}

// RecoverFromBox recovers a session from what its lease keeps on the box,
// for a machine without its journal: the original config and its owner.
// A lease that already restored the box leaves nothing to do (said with
// an error naming it, as "nothing to recover"); a session that may still
// be alive is refused unless opts.Force. Every service action runs but a
// reboot (the journal that named the session's actions is elsewhere).
func RecoverFromBox(ctx context.Context, fw Firewall, guard Guard, opts RecoverOptions) (RecoverReport, error) {
	rep := RecoverReport{FromBox: true}
	l, ok := guard.(Leaser)
	if !ok {
		return rep, errors.New("recover: this firewall's guard keeps no lease: nothing to recover from the box")
	}
	info, err := l.LeaseStatus(ctx)
	if err != nil {
		return rep, fmt.Errorf("recover: %w", err)
	}
	rep.Owner = info.Owner
	if info.Owner == "" {
		return rep, errors.New("recover: no journal here and no fwab lease on the box: nothing to recover")
	}
	if strings.HasPrefix(info.Ended, "restored") || strings.HasPrefix(info.Ended, "stood-down") {
		rep.LeaseEnded = info.Ended
		l.ReleaseLease(ctx)
		if err := guard.ForceUnlock(ctx); err != nil {
			return rep, fmt.Errorf("recover: %w", err)
		}
		return rep, fmt.Errorf("recover: nothing to recover: the lease of %s ended on the box (%s)", info.Owner, info.Ended)
	}
	if info.Held && info.Now.Before(info.Expires) && !opts.Force {
		return rep, fmt.Errorf("recover: %w", &SessionAliveError{Owner: info.Owner, Expires: info.Expires, Why: "this machine has no journal of it, so it may run elsewhere"})
	}
	orig, err := l.ReadLeaseOriginal(ctx)
	if err != nil {
		return rep, fmt.Errorf("recover: %w", err)
	}
	// The lease's hand-off first (the watchdog must not run now), its
	// files kept until the restore is done: a failed restore can be tried
	// again from here.
	if err := l.ClaimLease(ctx); err != nil {
		return rep, fmt.Errorf("recover: %w", err)
	}
	if err := guard.Disarm(ctx); err != nil && !rollbackOver(err) {
		return rep, fmt.Errorf("recover: %w", err)
	}
	rep.SHA256 = SHA256Hex(orig)
	cur, err := fw.ReadConfig(ctx)
	if err != nil {
		return rep, fmt.Errorf("recover: %w", err)
	}
	for _, a := range actionOrder {
		if a != configxml.ActionReboot {
			rep.Actions = append(rep.Actions, a)
		}
	}
	if curSum := SHA256Hex(cur); curSum != rep.SHA256 && !slices.Contains(info.Written, curSum) {
		if !opts.Force {
			return rep, fmt.Errorf("recover: config.xml on the box (sha256 %s) is none of the configs the session of %s left there: someone else's edit, left as it is; settle it by hand, then run 'fwab fw recover --force' to end the session without writing", curSum, info.Owner)
		}
		// Forced: the session ends, and nothing is written over the edit.
		l.ReleaseLease(ctx)
		if err := guard.ForceUnlock(ctx); err != nil {
			return rep, fmt.Errorf("recover: %w", err)
		}
		rep.Left = true
		return rep, nil
	}
	if err := restoreConfig(ctx, fw, orig, rep.SHA256, rep.Actions); err != nil {
		return rep, fmt.Errorf("recover: %w", err)
	}
	rep.Restored = true
	if err := l.ReleaseLease(ctx); err != nil {
		return rep, fmt.Errorf("recover: %w", err)
	}
	if err := guard.ForceUnlock(ctx); err != nil {
		return rep, fmt.Errorf("recover: %w", err)
	}
	if err := verifyRestored(ctx, fw, orig, nil); err != nil {
		return rep, fmt.Errorf("recover: the session is ended, but %w", err)
	}
	return rep, nil
}

// runtimeFindings is what VerifyRuntime finds of config on the running
// box, as keys (rule: message).
func runtimeFindings(ctx context.Context, fw Firewall, config []byte) (map[string]bool, error) {
	c, err := configxml.LoadBytes(config)
	if err != nil {
		return nil, err
	}
	st, err := fw.RuntimeState(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, f := range VerifyRuntime(c, st) {
		if f.Severity == configxml.SeverityError {
			out[f.Rule+": "+f.Message] = true
		}
	}
	return out, nil
}

// RestoreSettle is how long a restore's check waits for the running state
// to match the restored config: a service restarted in the background
// (Suricata) is back some seconds after the command that restarted it.
var RestoreSettle = 60 * time.Second

// verifyRestored checks the running state against the restored config
// with the same runtime checks verify uses: "restored" means running as
// the original says, not only config.xml's hash. Findings the original
// already had at the session's start (baseline; nil when unknown, then
// every error counts) are not the restore's.
func verifyRestored(ctx context.Context, fw Firewall, config []byte, baseline map[string]bool) error {
	deadline := time.Now().Add(RestoreSettle)
	for {
		found, err := runtimeFindings(ctx, fw, config)
		var bad []string
		for f := range found {
			if !baseline[f] {
				bad = append(bad, f)
			}
		}
		if err == nil && len(bad) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("the config is back (sha256 verified) but its running state could not be read: %w", err)
			}
			slices.Sort(bad)
			return fmt.Errorf("the config is back (sha256 verified) but the firewall does not run as it says, %v after the restore: %s", RestoreSettle, strings.Join(bad, "; "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
