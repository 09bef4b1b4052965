#if canImport(Glibc)
import Glibc
#endif

/// A growable array of plain values stored in pages of 4,096 elements:
/// appending never moves what is stored. A plain array doubles, copying its
/// whole content into fresh memory each time (for a value per task, about
/// 1% of a 200,000-task run went to those copies and their page faults);
/// an array of arrays paid a uniqueness check and bounds checks on two
/// levels at each append (about 60 instructions a task). Pages come from
/// malloc and are freed with the array; elements are bit-copyable, so
/// nothing is retained or released.
struct PagedArray<Element: BitwiseCopyable>: ~Copyable {
    private static var shift: Int { 12 }
    private static var pageSize: Int { 1 << shift }
    /// The pages, each `pageSize` elements; the last one filled to
    /// `count & (pageSize - 1)` (a full one when that is 0 and count > 0).
    private var pages: UnsafeMutablePointer<UnsafeMutablePointer<Element>>?
    private var pageCapacity = 0
    private var pageCount = 0
    private(set) var count = 0

    init() {}

    deinit {
        for p in 0..<pageCount { free(pages![p]) }
        free(pages)
    }

    var isEmpty: Bool { count == 0 }
    var indices: Range<Int> { 0..<count }

    @inline(__always)
    mutating func append(_ e: Element) {
        let slot = count & (Self.pageSize - 1)
        if slot == 0 { addPage() }
        pages.unsafelyUnwrapped[pageCount - 1][slot] = e
        count += 1
    }

    private mutating func addPage() {
        if pageCount == pageCapacity {
            pageCapacity = max(16, pageCapacity * 2)
            guard let grown = realloc(pages, pageCapacity * MemoryLayout<UnsafeMutablePointer<Element>>.stride) else {
                fatalError("tasker: out of memory (task table)")
            }
            pages = grown.assumingMemoryBound(to: UnsafeMutablePointer<Element>.self)
        }
        guard let page = malloc(Self.pageSize * MemoryLayout<Element>.stride) else {
            fatalError("tasker: out of memory (task table)")
        }
        pages![pageCount] = page.assumingMemoryBound(to: Element.self)
        pageCount += 1
    }

    subscript(i: Int) -> Element {
        @inline(__always) get {
            precondition(i >= 0 && i < count, "index out of range")
            return pages.unsafelyUnwrapped[i >> Self.shift][i & (Self.pageSize - 1)]
        }
        @inline(__always) set {
            precondition(i >= 0 && i < count, "index out of range")
            pages.unsafelyUnwrapped[i >> Self.shift][i & (Self.pageSize - 1)] = newValue
        }
    }
}
