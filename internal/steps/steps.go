// Package steps runs the subcommands, or steps, of the bench commands
// under internal/cmd (`exportbench seed …`, `feedwalk walk …`): the one
// place that picks a step by its name, prints the usage line and turns a
// step's error into an exit status.
package steps

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// Step is one subcommand: its name and what runs it with the arguments
// after the name.
type Step struct {
	Name string
	Run  func(args []string) error
}

// Main runs the step of steps that os.Args[1] names with the arguments
// after it, then exits: 0 when it returns nil; 2 with a usage line
// ("usage: CMD seed|get [flags]") when no step is named; 1 with the error,
// prefixed by cmd, when the name is unknown or the step fails.
func Main(cmd string, steps ...Step) {
	os.Exit(run(os.Stderr, cmd, os.Args[1:], steps))
}

// run is Main writing to stderr and returning the exit status.
func run(stderr io.Writer, cmd string, args []string, steps []Step) int {
	names := make([]string, len(steps))
	for i, s := range steps {
		names[i] = s.Name
	}
	if len(args) == 0 {
		fmt.Fprintf(stderr, "usage: %s %s [flags]\n", cmd, strings.Join(names, "|"))
		return 2
	}
	for _, s := range steps {
		if s.Name == args[0] {
			if err := s.Run(args[1:]); err != nil {
				fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
				return 1
			}
			return 0
		}
	}
	fmt.Fprintf(stderr, "%s: unknown step %q: want %s\n", cmd, args[0], strings.Join(names, ", "))
	return 1
}
