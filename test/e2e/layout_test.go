package e2e

import (
	"bufio"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

const module = "github.com/vcon-server/vcon-server"

// TestLayout holds the house rules of the README's code table, so that a
// later change cannot quietly bring back what the layout removed: the
// configuration read in one place, test-only code under test/, object
// keys spelled in one file, files that hold one job, comments that cite
// the repository's own docs.
func TestLayout(t *testing.T) {
	root := testenv.ModuleRoot(t)

	t.Run("ConfigReadByCLIOnly", func(t *testing.T) {
		cmd := exec.Command("go", "list", "-json=ImportPath,Imports", "./...")
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list: %v", err)
		}
		dec := json.NewDecoder(strings.NewReader(string(out)))
		for dec.More() {
			var p struct {
				ImportPath string
				Imports    []string
			}
			if err := dec.Decode(&p); err != nil {
				t.Fatal(err)
			}
			pkg := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
			if strings.HasPrefix(pkg, "test/") || strings.HasPrefix(pkg, "scripts/") {
				continue // tests, and the tools that drive a server from outside
			}
			// internal/kms takes its own [kms] table (kms.New), so that the
			// three providers' settings are read next to the code that uses
			// them; cli still decides when a KMS is made.
			readsConfig := pkg == "cli" || pkg == "internal/config" || pkg == "internal/kms"
			if !readsConfig && slices.Contains(p.Imports, module+"/internal/config") {
				t.Errorf("%s imports config: only cli turns the configuration into running parts (cli/open.go)", pkg)
			}
			for _, imp := range p.Imports {
				if strings.HasPrefix(imp, module+"/test/") {
					t.Errorf("%s imports %s: test-only code stays out of the product", pkg, imp)
				}
			}
		}
	})

	t.Run("TopLevel", func(t *testing.T) {
		for _, name := range []string{"storage", "e2e", "packtest", "reliability"} {
			if _, err := os.Stat(filepath.Join(root, name)); err == nil {
				t.Errorf("%s/ is at the top again: test-only packages live under test/, and objstore/ is the one home of stores", name)
			}
		}
		// The rooms of the system at the top, the plumbing under internal/
		// (README, "The code"): a new top-level folder has to make room.
		out, err := exec.Command("git", "-C", root, "ls-files").Output()
		if err != nil {
			t.Fatalf("git ls-files: %v", err)
		}
		folders := map[string]bool{}
		for _, path := range strings.Split(string(out), "\n") {
			if top, _, nested := strings.Cut(path, "/"); nested {
				folders[top] = true
			}
		}
		if len(folders) > 18 {
			t.Errorf("%d tracked folders at the top, want at most 18: put plumbing under internal/ and fixtures under test/", len(folders))
		}
	})

	t.Run("CatalogFiledInDoc", func(t *testing.T) {
		// catalog/doc.go's table names every file of the package, so a
		// newcomer finds a table's queries by its name; a file added or
		// renamed without the table is caught here.
		doc, err := os.ReadFile(filepath.Join(root, "catalog", "doc.go"))
		if err != nil {
			t.Fatal(err)
		}
		named := map[string]bool{}
		row := regexp.MustCompile(`(?m)^//\t(\S+\.go)\s`)
		for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
			named[m[1]] = true
		}
		files, err := filepath.Glob(filepath.Join(root, "catalog", "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			name := filepath.Base(file)
			if strings.HasSuffix(name, "_test.go") || name == "doc.go" {
				continue
			}
			if !named[name] {
				t.Errorf("catalog/%s is not in catalog/doc.go's table: name it, with its tables and docs/FORMAT.md section", name)
			}
			delete(named, name)
		}
		for name := range named {
			t.Errorf("catalog/doc.go's table names %s, which catalog/ does not hold", name)
		}
	})

	t.Run("CatalogRowsThroughEachRow", func(t *testing.T) {
		// Every read of rows in catalog/ goes through eachRow
		// (catalog/scan.go), which closes them, checks their error and
		// stops where its callback says: a loop written by hand again is
		// where a missed rows.Err or a statement left open comes back.
		files, err := filepath.Glob(filepath.Join(root, "catalog", "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			name := filepath.Base(file)
			if strings.HasSuffix(name, "_test.go") || name == "scan.go" {
				continue
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) > 0 {
					return true
				}
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Next" {
					t.Errorf("catalog/%s:%d calls Next on rows: read them with eachRow or queryAll (catalog/scan.go)", name, fset.Position(call.Pos()).Line)
				}
				return true
			})
		}
	})

	keyLiteral := regexp.MustCompile(`"(tenants/|objects/|purged/|tenant=)`)
	citation := regexp.MustCompile(`\b(SPEC|STYLE|DESIGN)\b|seed (page|000|001)|the seed\b`)
	for _, file := range sourceFiles(t, root) {
		rel, _ := filepath.Rel(root, file)
		if strings.HasPrefix(rel, "test/") || strings.HasPrefix(rel, "objstore/storetest/") {
			continue
		}
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		lines := 0
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines++
			code, comment, _ := strings.Cut(sc.Text(), "//")
			if rel != "archive/layout.go" && keyLiteral.MatchString(code) {
				t.Errorf("%s:%d spells an object key; every key is spelled in archive/layout.go", rel, lines)
			}
			if citation.MatchString(comment) {
				t.Errorf("%s:%d: a comment cites a document outside the repository; cite docs/FORMAT.md or a docs page", rel, lines)
			}
		}
		f.Close()
	}

	t.Run("Sizes", func(t *testing.T) {
		for _, file := range sourceFiles(t, root) {
			rel, _ := filepath.Rel(root, file)
			if underTestFolder(rel) {
				continue
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			if lines := fset.File(f.Pos()).LineCount(); lines > maxFileLines {
				t.Errorf("%s has %d lines: split it by what it holds (no production file over %d)", rel, lines, maxFileLines)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				var name string
				switch fn := n.(type) {
				case *ast.FuncDecl:
					name = fn.Name.Name
				case *ast.FuncLit:
					name = "a function literal"
				default:
					return true
				}
				start, end := fset.Position(n.Pos()), fset.Position(n.End())
				if lines := end.Line - start.Line + 1; lines > maxFuncLines {
					t.Errorf("%s:%d: %s has %d lines: break it into named steps (no production function over %d)", rel, start.Line, name, lines, maxFuncLines)
				}
				return true
			})
		}
	})
}

// The size rules hold for production code: every Go file that is not a
// test and does not sit under a test/ or testdata/ folder.
const (
	maxFileLines = 500
	maxFuncLines = 100
)

// underTestFolder reports whether a module-relative path sits under a
// folder named test or testdata, at any depth.
func underTestFolder(rel string) bool {
	dirs := strings.Split(filepath.ToSlash(filepath.Dir(rel)), "/")
	return slices.Contains(dirs, "test") || slices.Contains(dirs, "testdata")
}

// sourceFiles lists the module's Go files that are not tests.
func sourceFiles(t *testing.T, root string) []string {
	var files []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
