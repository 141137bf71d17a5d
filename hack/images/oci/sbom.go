package oci

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/mod/module"
)

// An SPDX 2.3 document (https://spdx.github.io/spdx-spec/v2.3/), only the
// fields written here.
type SPDX struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      SPDXCreationInfo   `json:"creationInfo"`
	Packages          []SPDXPackage      `json:"packages"`
	Relationships     []SPDXRelationship `json:"relationships"`
}

type SPDXCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type SPDXPackage struct {
	Name                  string            `json:"name"`
	SPDXID                string            `json:"SPDXID"`
	VersionInfo           string            `json:"versionInfo,omitempty"`
	DownloadLocation      string            `json:"downloadLocation"`
	FilesAnalyzed         bool              `json:"filesAnalyzed"`
	Checksums             []SPDXChecksum    `json:"checksums,omitempty"`
	ExternalRefs          []SPDXExternalRef `json:"externalRefs,omitempty"`
	PrimaryPackagePurpose string            `json:"primaryPackagePurpose,omitempty"`
	Comment               string            `json:"comment,omitempty"`
}

type SPDXChecksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type SPDXExternalRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type SPDXRelationship struct {
	SPDXElementID      string `json:"spdxElementId"`
	RelationshipType   string `json:"relationshipType"`
	RelatedSPDXElement string `json:"relatedSpdxElement"`
}

// spdxID makes an SPDX identifier (letters, digits, '.', '-') from parts.
func spdxID(parts ...string) string {
	s := strings.Join(parts, "-")
	return "SPDXRef-" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '-'
	}, s)
}

// goPackage describes the Go module m as a package, with its go.sum hash.
func goPackage(m *debug.Module) SPDXPackage {
	if m.Replace != nil {
		m = m.Replace
	}
	p := SPDXPackage{
		Name:             m.Path,
		SPDXID:           spdxID("Go", m.Path, m.Version),
		VersionInfo:      m.Version,
		DownloadLocation: "NOASSERTION",
		ExternalRefs: []SPDXExternalRef{{
			ReferenceCategory: "PACKAGE-MANAGER",
			ReferenceType:     "purl",
			ReferenceLocator:  "pkg:golang/" + m.Path + "@" + m.Version,
		}},
	}
	if path, err := module.EscapePath(m.Path); err == nil {
		if version, err := module.EscapeVersion(m.Version); err == nil {
			p.DownloadLocation = "https://proxy.golang.org/" + path + "/@v/" + version + ".zip"
		}
	}
	// go.sum's h1: is the SHA-256 of the module's file list (dirhash), the
	// Go module's own identity check; SPDX has no algorithm of that name, so
	// it is given as SHA256 (as syft does) and spelled out in the comment.
	if sum, ok := strings.CutPrefix(m.Sum, "h1:"); ok {
		if raw, err := base64.StdEncoding.DecodeString(sum); err == nil && len(raw) == sha256.Size {
			p.Checksums = []SPDXChecksum{{Algorithm: "SHA256", ChecksumValue: hex.EncodeToString(raw)}}
			p.Comment = "go.sum " + m.Sum
		}
	}
	return p
}

// CAModule is the Go module the CA roots come from, golang.org/x/crypto/
// x509roots/fallback, as the running program was built with it; nil if its
// build info does not say (a test binary's has no modules).
func CAModule() *debug.Module {
	const path = "golang.org/x/crypto/x509roots/fallback"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == path {
				return m
			}
		}
	}
	return nil
}

// SBOM describes cmd's image for p (manifest digest) and the binary bin it
// holds: the image, the binary's main module, Go's standard library and
// every module linked in, from the binary's own build info, and the CA
// roots' module caRoots (see CAModule).
func SBOM(cmd string, p v1.Platform, bin string, digest v1.Hash, m Meta, caRoots *debug.Module) ([]byte, error) {
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", bin, err)
	}
	ref := Reference(Repository, cmd, m.Version)
	image, main, stdlib := imagePackage(cmd, p, digest, m), mainPackage(bi, m), stdlibPackage(bi)
	ca := goPackage(caRoots)
	ca.Comment = strings.TrimSpace("the CA roots at " + CABundle + " come from this module; " + ca.Comment)

	doc := SPDX{
		SPDXVersion: "SPDX-2.3",
		DataLicense: "CC0-1.0",
		SPDXID:      "SPDXRef-DOCUMENT",
		Name:        ref + " " + p.String(),
		// Unique per image, as the spec asks, and the same for every build
		// of it.
		DocumentNamespace: Source + "/spdx/" + cmd + "/" + m.Version + "/" + p.OS + "-" + p.Architecture + "/" + digest.Hex,
		CreationInfo: SPDXCreationInfo{
			Created:  m.Created.UTC().Format("2006-01-02T15:04:05Z"),
			Creators: []string{"Tool: elasti-hack-images", "Organization: elasti"},
		},
		Packages: []SPDXPackage{image, main, stdlib, ca},
		Relationships: []SPDXRelationship{
			{"SPDXRef-DOCUMENT", "DESCRIBES", image.SPDXID},
			{image.SPDXID, "CONTAINS", main.SPDXID},
			{image.SPDXID, "CONTAINS", ca.SPDXID},
			{main.SPDXID, "DEPENDS_ON", stdlib.SPDXID},
		},
	}
	seen := map[string]bool{}
	for _, pkg := range doc.Packages {
		seen[pkg.SPDXID] = true
	}
	for _, dep := range bi.Deps {
		pkg := goPackage(dep)
		if seen[pkg.SPDXID] {
			continue
		}
		seen[pkg.SPDXID] = true
		doc.Packages = append(doc.Packages, pkg)
		doc.Relationships = append(doc.Relationships, SPDXRelationship{main.SPDXID, "DEPENDS_ON", pkg.SPDXID})
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false) // a purl's & stays readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// imagePackage is cmd's image for p, named by its manifest digest.
func imagePackage(cmd string, p v1.Platform, digest v1.Hash, m Meta) SPDXPackage {
	return SPDXPackage{
		Name:             cmd,
		SPDXID:           spdxID("Image", cmd),
		VersionInfo:      m.Version,
		DownloadLocation: "NOASSERTION",
		Checksums:        []SPDXChecksum{{Algorithm: "SHA256", ChecksumValue: digest.Hex}},
		ExternalRefs: []SPDXExternalRef{{
			ReferenceCategory: "PACKAGE-MANAGER",
			ReferenceType:     "purl",
			ReferenceLocator:  "pkg:oci/" + cmd + "@sha256%3A" + digest.Hex + "?arch=" + p.Architecture + "&os=" + p.OS + "&repository_url=" + Repository + "/" + cmd + "&tag=" + m.Version,
		}},
		PrimaryPackagePurpose: "CONTAINER",
		Comment:               Reference(Repository, cmd, m.Version) + " for " + p.String() + "; the checksum is the image manifest's digest",
	}
}

// mainPackage is the binary's main module, at the release's version and
// commit.
func mainPackage(bi *buildinfo.BuildInfo, m Meta) SPDXPackage {
	return SPDXPackage{
		Name:             bi.Main.Path,
		SPDXID:           spdxID("Go", bi.Main.Path),
		VersionInfo:      m.Version,
		DownloadLocation: "git+" + Source + "@" + m.Revision,
		ExternalRefs: []SPDXExternalRef{{
			ReferenceCategory: "PACKAGE-MANAGER",
			ReferenceType:     "purl",
			ReferenceLocator:  "pkg:golang/" + bi.Main.Path + "@" + m.Version,
		}},
		PrimaryPackagePurpose: "APPLICATION",
		Comment:               Binary + ", built from " + bi.Path,
	}
}

// stdlibPackage is the standard library of the Go that built the binary.
func stdlibPackage(bi *buildinfo.BuildInfo) SPDXPackage {
	goVersion := strings.TrimPrefix(bi.GoVersion, "go")
	return SPDXPackage{
		Name:             "stdlib",
		SPDXID:           spdxID("Go", "stdlib", goVersion),
		VersionInfo:      goVersion,
		DownloadLocation: "https://go.dev/dl/",
		ExternalRefs: []SPDXExternalRef{{
			ReferenceCategory: "PACKAGE-MANAGER",
			ReferenceType:     "purl",
			ReferenceLocator:  "pkg:golang/stdlib@" + goVersion,
		}},
		Comment: "the Go toolchain that built " + Binary,
	}
}
